// Package s3test runs a real S3-compatible server on loopback for this
// module's tests and benchmarks: versitygw (github.com/versity/versitygw)
// with its POSIX backend over a temporary directory.
//
// The server is built from the Go module proxy through tools/versitygw, a
// Go module of its own, so that neither the product's go.mod nor its
// binary depends on it. The binary is built once per machine and per
// version of tools/versitygw (its go.mod and go.sum, and the Go version)
// and kept under the user cache directory ($XDG_CACHE_HOME or
// ~/.cache/feedmesh/versitygw); concurrent test binaries wait for one
// build under a file lock. FEEDMESH_VERSITYGW names a binary to use
// instead. When the binary is missing and the module proxy cannot be
// reached, Start returns ErrUnavailable and tests skip saying so.
package s3test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// ErrUnavailable: the server binary is not built and cannot be (the Go
// module proxy is unreachable).
var ErrUnavailable = errors.New("S3 test server unavailable")

// The root credentials every Server accepts.
const (
	AccessKey = "feedmesh-test"
	SecretKey = "feedmesh-test-secret-key"
)

// Server is a running versitygw serving Root.
type Server struct {
	// Endpoint is http://127.0.0.1:port.
	Endpoint string
	// Root holds a directory per bucket.
	Root string
	// Client is an S3 client with the root credentials, to put and
	// delete objects.
	Client *minio.Client

	transport *http.Transport
	cmd       *exec.Cmd
	exited    chan struct{}
	stderr    *tailBuffer
	once      sync.Once
}

// Config is an objstore.Config that reaches the server (path-style).
// Credentials are not in it: see SetCredentials.
func (s *Server) Config() objstore.Config {
	return objstore.Config{Endpoint: s.Endpoint, PathStyle: true, Region: "us-east-1"}
}

// NamedStore is the server as a node's named object store (what
// `--object-store NAME=endpoint=…,region=us-east-1,path_style=true` gives
// a node): specs read it as s3://NAME/bucket/key. Credentials come from
// the environment: see SetCredentials.
func (s *Server) NamedStore(name string) objstore.NamedStore {
	return objstore.NamedStore{Name: name, Endpoint: s.Endpoint, Region: "us-east-1", PathStyle: true}
}

// SetCredentials puts the root credentials in the environment variables
// objstore reads (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) for the test.
func SetCredentials(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
}

// StartT starts a server in a temporary directory, skips the test when
// the server is unavailable, fails it on any other error, and stops the
// server when the test ends.
func StartT(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s, err := Start(ctx, t.TempDir())
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Start builds (or finds) the binary and starts a server over root on a
// free loopback port, returning once it answers requests.
func Start(ctx context.Context, root string) (*Server, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ { // the free port may be taken meanwhile
		s, err := start(ctx, bin, root)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func start(ctx context.Context, bin, root string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &Server{Endpoint: "http://" + addr, Root: root, exited: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	s.cmd = exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "--quiet", "posix", root)
	s.cmd.Stdout = s.stderr
	// The server dies with the test binary, even when it is killed.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { // owned by s: Close waits for it
		s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx, addr); err != nil {
		s.Close()
		return nil, err
	}
	s.transport = http.DefaultTransport.(*http.Transport).Clone()
	s.Client, err = minio.New(addr, &minio.Options{Transport: s.transport, Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// waitReady polls the port until the server answers (any HTTP status).
func (s *Server) waitReady(ctx context.Context, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		resp, err := hc.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("versitygw exited: %s", s.stderr.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw on %s did not answer within 30 s: %s", addr, s.stderr.String())
		}
	}
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	s.once.Do(func() {
		if s.transport != nil {
			s.transport.CloseIdleConnections()
		}
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return nil
}

// CPU is the CPU time the server process has used (Linux: /proc).
func (s *Server) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime and stime fields 14 and 15, in clock ticks (100/s).
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", s.cmd.Process.Pid, len(f))
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// MakeBucket creates a bucket.
func (s *Server) MakeBucket(ctx context.Context, bucket string) error {
	return s.Client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
}

// Put writes an object.
func (s *Server) Put(ctx context.Context, bucket, key string, data []byte) error {
	_, err := s.Client.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	return err
}

// Delete removes an object.
func (s *Server) Delete(ctx context.Context, bucket, key string) error {
	return s.Client.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Binary returns the path of a versitygw binary: FEEDMESH_VERSITYGW, else
// the cached build of tools/versitygw, built now if missing.
func Binary(ctx context.Context) (string, error) {
	if b := os.Getenv("FEEDMESH_VERSITYGW"); b != "" {
		return b, nil
	}
	mod, err := moduleDir()
	if err != nil {
		return "", err
	}
	key, err := buildKey(mod)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "feedmesh", "versitygw", key)
	bin := filepath.Join(dir, "versitygw")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// One build per machine: other test binaries wait for it here.
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "github.com/versity/versitygw/cmd/versitygw")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		msg := strings.TrimSpace(string(out))
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		if unreachable(msg) {
			return "", fmt.Errorf("%w: building versitygw in %s needs the Go module proxy, which is unreachable: %s", ErrUnavailable, mod, msg)
		}
		return "", fmt.Errorf("build versitygw in %s: %v: %s", mod, err, msg)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// unreachable tells whether a failed build failed to download modules.
func unreachable(out string) bool {
	for _, s := range []string{"dial tcp", "no such host", "i/o timeout", "connection refused", "proxyconnect",
		"network is unreachable", "TLS handshake timeout", "connection reset", "GOPROXY=off", "GOFLAGS=-mod=vendor"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// moduleDir finds tools/versitygw above the working directory (a test
// runs in its package's directory) or beside this source file.
func moduleDir() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, d := range starts {
		for {
			m := filepath.Join(d, "tools", "versitygw")
			if _, err := os.Stat(filepath.Join(m, "go.mod")); err == nil {
				return m, nil
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
	}
	return "", fmt.Errorf("%w: tools/versitygw not found above %v (run from the feedmesh repository, or set FEEDMESH_VERSITYGW to a versitygw binary)", ErrUnavailable, starts)
}

// buildKey names a build: tools/versitygw's go.mod and go.sum and the Go
// toolchain's version.
func buildKey(mod string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(mod, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("%w: no go toolchain to build versitygw with: %v", ErrUnavailable, err)
	}
	h.Write(goVersion)
	h.Write([]byte(runtime.GOOS + "/" + runtime.GOARCH))
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
