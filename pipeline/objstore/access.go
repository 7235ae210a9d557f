package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
)

// ErrNotAllowed: the data-access policy refuses a path, URL or object
// store (errors.Is). What a caller sees says no more than that: not
// whether the file exists, where a link points, what a name resolves to
// or which rule refused it. Access logs each refusal with its reason.
var ErrNotAllowed = errors.New("not allowed")

// DeniedError is a refusal of the data-access policy. Its message names
// only what the spec named; Reason, for the log, says why.
type DeniedError struct {
	// Name is the path or URL as the spec gave it (or a file its glob
	// matched under a data root).
	Name string
	// Reason is the detail, for the node's log only.
	Reason string
}

func (e *DeniedError) Error() string { return fmt.Sprintf("%q: %v", e.Name, ErrNotAllowed) }

// Unwrap returns ErrNotAllowed.
func (e *DeniedError) Unwrap() error { return ErrNotAllowed }

// Protected is a file or directory no spec may read whatever the data
// roots (a node's data dir, TLS files, gossip key file, object-store
// credentials file).
type Protected struct {
	Path string
	// What it is, for messages ("the node's TLS key").
	What string
}

// AccessConfig is a data-access policy: what the pipelines a process runs
// may read. The zero value allows nothing.
type AccessConfig struct {
	// AllLocalFiles reads local paths as the process may, with no data
	// roots (Roots must be empty): a user's own process (run-local, a Go
	// program embedding the pipeline).
	AllLocalFiles bool
	// Roots are the directories whose files (and directories, for globs
	// and image folders) specs may read. A path in a spec is either
	// relative, to the first root, or absolute under one of them. Files
	// are opened through os.Root: a path has no `..` component, and a
	// symbolic link is followed only when it stays inside its root (a
	// link to an absolute path never is). A root may neither contain nor
	// lie inside a Protected path, /proc, /sys or /dev: NewAccess refuses
	// it.
	Roots []string
	// ImplicitRoot is a root the operator did not choose (a node's
	// current directory in loopback dev mode): the Protected paths under
	// it are left out of it instead of refused (a spec naming one is
	// refused, a glob does not see them), and when it lies inside one,
	// /proc, /sys or /dev, there is no such root (a warning says so).
	// Used only when Roots is empty.
	ImplicitRoot string
	// Protected are the paths no root may expose.
	Protected []Protected

	// AllHosts lets http(s) sources reach any host, through the
	// environment's proxy if any (a user's own process).
	AllHosts bool
	// AllowHosts are the hosts http(s) sources may reach when AllHosts
	// is false: a host name ("data.example.com"), "*.example.com" (any
	// name under it), "*" (any name), an IP address or a CIDR network
	// ("10.1.0.0/16"). A name allows its public addresses only:
	// loopback, link-local, private and other special addresses must be
	// allowed by address or network. Every redirect hop, and every
	// address a name resolves to when the connection is made, is checked
	// again, so a redirect or a name that later resolves elsewhere (DNS
	// rebinding) reaches nothing the list does not allow.
	AllowHosts []string

	// Stores are the named object stores s3:// URLs may read:
	// s3://NAME/bucket/key, or s3://bucket/key with the spec's
	// `object_store: {store: NAME}`.
	Stores []NamedStore
	// EnvStore lets an s3://bucket/key URL whose first segment names no
	// store read the S3 the environment configures (AWS_ENDPOINT_URL,
	// AWS_REGION, the AWS credentials; AWS S3 otherwise): a user's own
	// process.
	EnvStore bool

	// Log receives each refusal with its reason (WARN), and the roots'
	// warnings; nil discards them.
	Log *slog.Logger
}

// Access applies a data-access policy: every local path, URL and object
// a pipeline opens goes through one. It is safe for concurrent use.
type Access struct {
	local  localFiles
	hosts  *HostPolicy // nil: any host
	stores map[string]NamedStore
	env    bool
	log    *slog.Logger
	desc   string

	mu         sync.Mutex
	hostStores map[*Store]bool // the Stores made for hosts (theirs alone)
	// parent is the policy a narrowed one was cut from (Narrow): it
	// keeps the Stores made for hosts, and closes them.
	parent *Access
}

var (
	localOnce   sync.Once
	localAccess *Access
	deniedOnce  sync.Once
	deniedAcc   *Access
)

// Local is the policy of a user's own process (run-local, tests, Go
// programs): its own files, any host, the environment's S3 and no named
// stores. A spec that no node decoded reads through it.
func Local() *Access {
	localOnce.Do(func() {
		localAccess, _ = NewAccess(AccessConfig{AllLocalFiles: true, AllHosts: true, EnvStore: true})
	})
	return localAccess
}

// Denied is a policy that allows nothing: what a spec that is only being
// checked (validated) would open through.
func Denied() *Access {
	deniedOnce.Do(func() { deniedAcc, _ = NewAccess(AccessConfig{}) })
	return deniedAcc
}

// NewAccess checks a policy and opens its roots. Its errors name the
// setting (a root that does not exist or holds a protected path, a bad
// host entry or store).
func NewAccess(cfg AccessConfig) (*Access, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Access{log: log, env: cfg.EnvStore, stores: map[string]NamedStore{}}
	var err error
	if a.local, err = newLocalFiles(cfg, log); err != nil {
		return nil, err
	}
	if !cfg.AllHosts {
		if a.hosts, err = newHostPolicy(cfg.AllowHosts); err != nil {
			return nil, err
		}
	}
	for _, s := range cfg.Stores {
		if err := s.check(); err != nil {
			return nil, err
		}
		if _, dup := a.stores[s.Name]; dup {
			return nil, fmt.Errorf("object store %q: configured twice", s.Name)
		}
		a.stores[s.Name] = s
	}
	a.desc = a.describe(cfg)
	return a, nil
}

// Close closes the roots and the idle connections of the stores made for
// the policy's hosts. Nothing may be opened through it afterwards.
func (a *Access) Close() error {
	if a.parent != nil {
		return nil // a narrowed view: its parent's Close closes
	}
	a.local.close()
	a.mu.Lock()
	defer a.mu.Unlock()
	for s := range a.hostStores {
		s.CloseIdleConnections()
	}
	return nil
}

// String says what the policy allows, for a node's start-up log line.
func (a *Access) String() string { return a.desc }

func (a *Access) describe(cfg AccessConfig) string {
	var parts []string
	switch {
	case a.local.all:
		parts = append(parts, "local files: all the process may read")
	case len(a.local.roots) == 0:
		parts = append(parts, "local files: none (no data roots)")
	default:
		var rs []string
		for _, r := range a.local.roots {
			s := r.forms[0]
			if len(r.excluded) > 0 {
				var ex []string
				for _, e := range r.excluded {
					ex = append(ex, e.rel+" ("+e.what+")")
				}
				s += " without " + strings.Join(ex, ", ")
			}
			rs = append(rs, s)
		}
		parts = append(parts, "data roots: "+strings.Join(rs, ", "))
	}
	switch {
	case a.hosts == nil:
		parts = append(parts, "hosts: any")
	case len(cfg.AllowHosts) == 0:
		parts = append(parts, "hosts: none")
	default:
		parts = append(parts, "hosts: "+strings.Join(cfg.AllowHosts, ", "))
	}
	var names []string
	for n := range a.stores {
		names = append(names, n)
	}
	sort.Strings(names)
	s := "object stores: " + strings.Join(names, ", ")
	if len(names) == 0 {
		s = "object stores: none"
	}
	if a.env {
		s += " (and the environment's S3)"
	}
	return strings.Join(append(parts, s), "; ")
}

// deny logs a refusal with its reason and returns the generic error.
func (a *Access) deny(name, reason string) error {
	a.log.Warn("data access refused", "name", name, "reason", reason)
	return &DeniedError{Name: name, Reason: reason}
}

// denied turns an error from deep inside (a dialer, a redirect check)
// that wraps a refusal into a refusal of name, the spec's URL: the hop's
// URL and the address stay in the log.
func (a *Access) denied(name string, err error) error {
	var d *DeniedError
	if errors.As(err, &d) {
		return a.deny(name, d.Reason+" ("+err.Error()+")")
	}
	return err
}

// Open opens a local path or an object URL under the policy; cfg's
// reading knobs (MaxConcurrentReads, ChunkBytes, ReadAheadChunks,
// MaxRetries) and, for s3:// URLs, its Store apply to objects.
func (a *Access) Open(ctx context.Context, name string, cfg Config) (File, error) {
	switch {
	case strings.HasPrefix(name, "s3://"):
		st, bucket, key, err := a.s3(name, cfg)
		if err != nil {
			return nil, err
		}
		return st.openS3(ctx, name, bucket, key)
	case strings.HasPrefix(name, "https://"), strings.HasPrefix(name, "http://"):
		st, err := a.httpStore(name, cfg)
		if err != nil {
			return nil, err
		}
		f, err := st.openHTTP(ctx, name)
		if err != nil {
			return nil, a.denied(name, err)
		}
		return f, nil
	}
	f, err := a.OpenFile(name)
	if err != nil {
		return nil, err
	}
	return localFileOf(f, name)
}

// Glob expands one pattern, local or remote, into the sorted names it
// matches, as a spec would name them. Local: files and directories, none
// for a pattern that matches nothing (as filepath.Glob); under data roots
// the protected paths are never listed. Objects: an s3 pattern that
// matches nothing is an error wrapping ErrNoMatch; a pattern without
// glob characters names one object, which must exist.
func (a *Access) Glob(ctx context.Context, pattern string, cfg Config) ([]string, error) {
	if !IsRemote(pattern) {
		return a.globLocal(pattern)
	}
	if !strings.HasPrefix(pattern, "s3://") {
		if HasMeta(pattern) {
			return nil, fmt.Errorf("%s: https URLs cannot be globbed (there is no listing): give each URL", pattern)
		}
		f, err := a.Open(ctx, pattern, cfg)
		if err != nil {
			return nil, err
		}
		f.Close()
		return []string{pattern}, nil
	}
	st, bucket, key, err := a.s3(pattern, cfg)
	if err != nil {
		return nil, err
	}
	prefix := pattern[:len(pattern)-len(bucket)-1-len(key)] // s3:// or s3://NAME/
	return st.globS3(ctx, pattern, prefix, bucket, key)
}

// localFileOf is an open local file with its size.
func localFileOf(f *os.File, name string) (File, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory", name)
	}
	return &localFile{File: f, size: st.Size()}, nil
}

// notExist is fs.ErrNotExist about name, as the spec named it.
func notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}
