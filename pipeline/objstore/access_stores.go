package objstore

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Credentials say where a store's credentials come from: never from a
// spec. The zero value is the AWS environment: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), else the shared
// credentials file (~/.aws/credentials or $AWS_SHARED_CREDENTIALS_FILE,
// profile $AWS_PROFILE), else unsigned requests.
type Credentials struct {
	// AccessKeyEnv, SecretKeyEnv and SessionTokenEnv name the environment
	// variables that hold the keys (a store's own, when several stores
	// have different keys).
	AccessKeyEnv, SecretKeyEnv, SessionTokenEnv string
	// File is a shared credentials file (the format of
	// ~/.aws/credentials), read with Profile ("default" when empty).
	File, Profile string
	// Anonymous sends unsigned requests (public buckets).
	Anonymous bool
}

// NamedStore is an object store a node's operator configured: specs name
// it, the node alone knows where it is and how to sign in.
type NamedStore struct {
	// Name is what specs call it: s3://NAME/bucket/key, or
	// `object_store: {store: NAME}`.
	Name string
	// Endpoint is the S3 service: a URL (http://minio.internal:9000) or
	// host:port (https). "" is AWS S3.
	Endpoint string
	// Region of its buckets; "" reads AWS_REGION, AWS_DEFAULT_REGION,
	// else asks the store.
	Region string
	// PathStyle addresses buckets as endpoint/bucket/key (most stores on
	// premises want it).
	PathStyle bool
	// Credentials say where its credentials come from.
	Credentials Credentials
}

var storeName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ParseNamedStore reads the --object-store flag's form:
// NAME=key=value,key=value,… with the keys endpoint, region, path_style
// (true/false), access_key_env, secret_key_env, session_token_env,
// credentials_file, profile, anonymous (true/false):
//
//	minio=endpoint=http://minio.internal:9000,region=us-east-1,path_style=true,credentials_file=/etc/feedmesh/minio.credentials
func ParseNamedStore(s string) (NamedStore, error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(s), "=")
	ns := NamedStore{Name: name}
	if rest != "" {
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			if !ok {
				return ns, fmt.Errorf("object store %q: %q: want key=value", name, kv)
			}
			boolean := func() (bool, error) {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return false, fmt.Errorf("object store %q: %s=%q: want true or false", name, k, v)
				}
				return b, nil
			}
			var err error
			switch k {
			case "endpoint":
				ns.Endpoint = v
			case "region":
				ns.Region = v
			case "path_style":
				ns.PathStyle, err = boolean()
			case "access_key_env":
				ns.Credentials.AccessKeyEnv = v
			case "secret_key_env":
				ns.Credentials.SecretKeyEnv = v
			case "session_token_env":
				ns.Credentials.SessionTokenEnv = v
			case "credentials_file":
				ns.Credentials.File = v
			case "profile":
				ns.Credentials.Profile = v
			case "anonymous":
				ns.Credentials.Anonymous, err = boolean()
			default:
				err = fmt.Errorf("object store %q: unknown key %q (known: endpoint, region, path_style, access_key_env, secret_key_env, session_token_env, credentials_file, profile, anonymous)", name, k)
			}
			if err != nil {
				return ns, err
			}
		}
	}
	return ns, ns.check()
}

// check validates a store's settings; errors name it.
func (s NamedStore) check() error {
	if !storeName.MatchString(s.Name) {
		return fmt.Errorf("object store %q: a name is 1 to 63 lower-case letters, digits, '.', '_' or '-' (NAME=endpoint=…)", s.Name)
	}
	if e := s.Endpoint; strings.Contains(e, "://") {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("object store %q: endpoint %q: want http(s)://host[:port] or host[:port]", s.Name, e)
		}
	}
	c := s.Credentials
	if (c.AccessKeyEnv == "") != (c.SecretKeyEnv == "") {
		return fmt.Errorf("object store %q: give access_key_env and secret_key_env together", s.Name)
	}
	if c.AccessKeyEnv != "" && (os.Getenv(c.AccessKeyEnv) == "" || os.Getenv(c.SecretKeyEnv) == "") {
		return fmt.Errorf("object store %q: $%s or $%s is empty", s.Name, c.AccessKeyEnv, c.SecretKeyEnv)
	}
	if c.File != "" {
		if _, err := os.Stat(c.File); err != nil {
			return fmt.Errorf("object store %q: credentials_file: %w", s.Name, err)
		}
	}
	if c.Anonymous && (c.AccessKeyEnv != "" || c.File != "" || c.Profile != "") {
		return fmt.Errorf("object store %q: anonymous takes no credentials", s.Name)
	}
	return nil
}

// CredentialsFiles are the files a store's credentials are read from (to
// keep them out of every data root): its credentials_file, or the shared
// credentials file the environment names when it uses the environment's.
func (s NamedStore) CredentialsFiles() []string {
	c := s.Credentials
	switch {
	case c.File != "":
		return []string{c.File}
	case c.Anonymous || c.AccessKeyEnv != "":
		return nil
	}
	if f := os.Getenv("AWS_SHARED_CREDENTIALS_FILE"); f != "" {
		return []string{f}
	}
	if home, err := os.UserHomeDir(); err == nil {
		return []string{filepath.Join(home, ".aws", "credentials")}
	}
	return nil
}

// endpointSet tells whether a Config says where a store is or how to
// sign in: a spec's config never may (Access refuses it outside a
// user's own process).
func (c Config) endpointSet() bool {
	return c.Endpoint != "" || c.Region != "" || c.PathStyle || c.Credentials != (Credentials{})
}

// s3 finds the Store an s3:// URL is read through, and its bucket and
// key: the named store cfg.Store, else the store the URL's first segment
// names (s3://NAME/bucket/key), else, in a user's own process, the
// environment's S3 (s3://bucket/key).
func (a *Access) s3(name string, cfg Config) (*Store, string, string, error) {
	if !a.env && cfg.endpointSet() {
		return nil, "", "", a.deny(name, "the spec chose the store's endpoint, region or credentials")
	}
	rest := strings.TrimPrefix(name, "s3://")
	storeName := cfg.Store
	var ns NamedStore
	found := false
	if storeName != "" {
		ns, found = a.stores[storeName]
		if !found {
			return nil, "", "", a.deny(name, "no object store named "+storeName+" (object_store.store) on this node")
		}
	} else if first, after, ok := strings.Cut(rest, "/"); ok {
		if ns, found = a.stores[first]; found {
			rest = after
		}
	}
	bucket, key, ok := strings.Cut(rest, "/")
	if !ok || bucket == "" || key == "" {
		return nil, "", "", fmt.Errorf("%s: want s3://STORE/bucket/key (or s3://bucket/key with object_store.store)", name)
	}
	switch {
	case found:
		c := cfg
		c.Store = ns.Name
		c.Endpoint, c.Region, c.PathStyle, c.Credentials = ns.Endpoint, ns.Region, ns.PathStyle, ns.Credentials
		if c.Endpoint == "" {
			c.Endpoint = "https://s3.amazonaws.com" // not the environment's
		}
		if c.Region == "" {
			c.Region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
		}
		c.Hosts = nil
		return For(c), bucket, key, nil
	case a.env:
		return For(cfg), bucket, key, nil
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(name, "s3://"), "/")
	return nil, "", "", a.deny(name, "no object store named "+first+" on this node (s3://STORE/bucket/key)")
}

// httpStore is the Store an http(s) URL is read through: one that checks
// every connection against the policy's hosts.
func (a *Access) httpStore(name string, cfg Config) (*Store, error) {
	c := Config{MaxConcurrentReads: cfg.MaxConcurrentReads, ChunkBytes: cfg.ChunkBytes, ReadAheadChunks: cfg.ReadAheadChunks,
		MaxRetries: cfg.MaxRetries, RetryBaseDelay: cfg.RetryBaseDelay, RetryMaxDelay: cfg.RetryMaxDelay, Transport: cfg.Transport}
	if a.hosts != nil {
		u, err := url.Parse(name)
		if err != nil {
			return nil, a.deny(name, err.Error())
		}
		if err := a.hosts.checkURL(u); err != nil {
			return nil, a.denied(name, err)
		}
		c.Hosts, c.Transport = a.hosts, nil
		st := For(c)
		reg := a
		if a.parent != nil {
			reg = a.parent
		}
		reg.mu.Lock()
		if reg.hostStores == nil {
			reg.hostStores = map[*Store]bool{}
		}
		reg.hostStores[st] = true
		reg.mu.Unlock()
		return st, nil
	}
	return For(c), nil
}
