package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
)

// Sentinel errors, for errors.Is. Every error also names the object.
var (
	// ErrNotFound: no object (or file) at that name.
	ErrNotFound = errors.New("not found")
	// ErrNoBucket: the bucket does not exist.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrDenied: the store refused the credentials or the access.
	ErrDenied = errors.New("access denied")
	// ErrVanished: the object was deleted or replaced while it was read.
	ErrVanished = errors.New("object vanished while reading")
	// ErrNoMatch: a glob matched no object.
	ErrNoMatch = errors.New("matches no objects")
)

// Config says how to reach object storage and how hard to read it. The
// zero value of a field means its default (DefaultConfig).
type Config struct {
	// Endpoint of the S3 service: a URL (http://127.0.0.1:7070) or host:port
	// (https assumed). "" reads AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL,
	// else AWS S3 (s3.amazonaws.com).
	Endpoint string
	// Region of the bucket. "" reads AWS_REGION, then AWS_DEFAULT_REGION,
	// else the client asks the store (GetBucketLocation).
	Region string
	// PathStyle puts the bucket in the URL path (endpoint/bucket/key)
	// instead of the host name (bucket.endpoint/key): what most
	// S3-compatible stores on premises want. When false, the client picks:
	// virtual-host style for AWS, path style elsewhere.
	PathStyle bool
	// MaxConcurrentReads bounds the requests in flight at once through one
	// Store (all its open files together). Default 16.
	MaxConcurrentReads int
	// ChunkBytes is the size of one range request. Default 8 MiB: large
	// enough that a request's latency is small beside its transfer.
	ChunkBytes int64
	// ReadAheadChunks is how many chunks a file reads ahead of the one in
	// use (and how many, plus one, it keeps): its memory is about
	// (ReadAheadChunks+1) × ChunkBytes. Default 2.
	ReadAheadChunks int
	// MaxRetries is how many times a request that failed with a
	// throttling or transient error is retried. Default 5; -1 for none.
	MaxRetries int
	// RetryBaseDelay is the first backoff; it doubles per retry, with
	// jitter, up to RetryMaxDelay. Defaults 100 ms and 5 s.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// Transport makes the HTTP requests (S3 and https); nil means a clone
	// of http.DefaultTransport. Tests use it to inject faults.
	Transport http.RoundTripper

	// Store is the named store (NamedStore) s3:// URLs are in, for
	// Access.Open; a spec's `object_store.store`.
	Store string
	// Credentials say where the S3 credentials come from (the zero
	// value: the AWS environment).
	Credentials Credentials
	// Hosts, when set, is the only place http(s) requests may go: the
	// Store checks every request's URL and redirect hop, and every
	// address it connects to (its own transport, without a proxy,
	// replaces Transport).
	Hosts *HostPolicy
}

// DefaultConfig returns the defaults, without the environment applied.
func DefaultConfig() Config {
	return Config{
		MaxConcurrentReads: 16,
		ChunkBytes:         8 << 20,
		ReadAheadChunks:    2,
		MaxRetries:         5,
		RetryBaseDelay:     100 * time.Millisecond,
		RetryMaxDelay:      5 * time.Second,
	}
}

// WithDefaults fills the zero fields from DefaultConfig and the endpoint
// and region from the environment.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.MaxConcurrentReads <= 0 {
		c.MaxConcurrentReads = d.MaxConcurrentReads
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = d.ChunkBytes
	}
	if c.ReadAheadChunks <= 0 {
		c.ReadAheadChunks = d.ReadAheadChunks
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = d.MaxRetries
	} else if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	if c.RetryBaseDelay <= 0 {
		c.RetryBaseDelay = d.RetryBaseDelay
	}
	if c.RetryMaxDelay <= 0 {
		c.RetryMaxDelay = d.RetryMaxDelay
	}
	if c.Endpoint == "" {
		c.Endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if c.Region == "" {
		c.Region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	return c
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// File is an open file or object: random access with a known size.
// Close waits for every request the file started.
type File interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// Versioned is a File that names the version it reads (a remote
// object's ETag): two opens with the same name, size and version read the
// same bytes.
type Versioned interface {
	Version() string
}

// RangeReader is a File that reads several whole byte ranges at once,
// concurrently (remote objects).
type RangeReader interface {
	ReadRanges(ctx context.Context, rs []Range) ([][]byte, error)
}

// Store opens files and objects. It is safe for concurrent use; one Store
// bounds the requests of all the files it opened.
type Store struct {
	cfg  Config
	sem  chan struct{}
	http *http.Client

	s3once sync.Once
	s3     *minio.Core
	s3err  error
}

var (
	storesMu sync.Mutex
	stores   = map[Config]*Store{}
)

// For returns the process's Store for a configuration (one per distinct
// Config, so that MaxConcurrentReads bounds every reader that shares it).
func For(cfg Config) *Store {
	storesMu.Lock()
	defer storesMu.Unlock()
	if s, ok := stores[cfg]; ok {
		return s
	}
	s := New(cfg)
	stores[cfg] = s
	return s
}

// CloseIdleConnections closes the idle HTTP connections of every Store
// made by For (their goroutines end with them); a later read dials again.
func CloseIdleConnections() {
	storesMu.Lock()
	defer storesMu.Unlock()
	for _, s := range stores {
		s.CloseIdleConnections()
	}
}

// CloseIdleConnections closes the Store's idle HTTP connections.
func (s *Store) CloseIdleConnections() { s.http.CloseIdleConnections() }

// New returns a Store of its own (tests; most callers want For).
func New(cfg Config) *Store {
	cfg = cfg.WithDefaults()
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	client := &http.Client{Transport: tr}
	if h := cfg.Hosts; h != nil {
		client = &http.Client{Transport: h.transport(), CheckRedirect: h.checkRedirect}
	}
	return &Store{
		cfg:  cfg,
		sem:  make(chan struct{}, cfg.MaxConcurrentReads),
		http: client,
	}
}

// IsRemote tells whether name is an object URL (s3://, https://, http://)
// rather than a local path.
func IsRemote(name string) bool {
	return strings.HasPrefix(name, "s3://") || strings.HasPrefix(name, "https://") || strings.HasPrefix(name, "http://")
}

// HasMeta tells whether a pattern has glob characters.
func HasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// Open opens a local path or an object URL.
func (s *Store) Open(ctx context.Context, name string) (File, error) {
	switch {
	case strings.HasPrefix(name, "s3://"):
		bucket, key, err := parseS3(name)
		if err != nil {
			return nil, err
		}
		return s.openS3(ctx, name, bucket, key)
	case strings.HasPrefix(name, "https://"), strings.HasPrefix(name, "http://"):
		return s.openHTTP(ctx, name)
	}
	return openLocal(name)
}

// Glob expands one remote pattern into the sorted object URLs it matches
// (path.Match syntax on the key: `*` does not cross `/`). A pattern with
// no glob characters names one object, which must exist. https URLs have
// no listing, so they cannot be globbed.
func (s *Store) Glob(ctx context.Context, pattern string) ([]string, error) {
	if !strings.HasPrefix(pattern, "s3://") && HasMeta(pattern) {
		return nil, fmt.Errorf("%s: https URLs cannot be globbed (there is no listing): give each URL", pattern)
	}
	if !strings.HasPrefix(pattern, "s3://") {
		f, err := s.Open(ctx, pattern)
		if err != nil {
			return nil, err
		}
		f.Close()
		return []string{pattern}, nil
	}
	bucket, key, err := parseS3(pattern)
	if err != nil {
		return nil, err
	}
	return s.globS3(ctx, pattern, "s3://", bucket, key)
}

// globS3 expands the key pattern of an s3:// URL (pattern, as the spec
// gave it) in bucket: the URLs of the objects it matches, each prefix +
// bucket/key.
func (s *Store) globS3(ctx context.Context, pattern, prefix, bucket, key string) ([]string, error) {
	if !HasMeta(key) {
		f, err := s.openS3(ctx, pattern, bucket, key)
		if err != nil {
			return nil, err
		}
		f.Close()
		return []string{pattern}, nil
	}
	if _, err := path.Match(key, ""); err != nil {
		return nil, fmt.Errorf("%s: bad pattern: %w", pattern, err)
	}
	keyPrefix := key
	if i := strings.IndexAny(key, `*?[\`); i >= 0 {
		keyPrefix = key[:i]
	}
	keys, err := s.listS3(ctx, prefix+bucket+"/"+keyPrefix, bucket, keyPrefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		if ok, _ := path.Match(key, k); ok {
			out = append(out, prefix+bucket+"/"+k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %w", pattern, ErrNoMatch)
	}
	sort.Strings(out)
	return out, nil
}

func parseS3(name string) (bucket, key string, err error) {
	rest := strings.TrimPrefix(name, "s3://")
	i := strings.IndexByte(rest, '/')
	if i <= 0 || i == len(rest)-1 {
		return "", "", fmt.Errorf("%s: want s3://bucket/key", name)
	}
	return rest[:i], rest[i+1:], nil
}
