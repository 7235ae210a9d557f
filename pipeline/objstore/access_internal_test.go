package objstore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tree: root/{a.txt, sub/b.txt, in-link -> a.txt, abs-link -> outside/secret,
// rel-link -> ../outside/secret, dir-link -> outside}, outside/secret.
func accessTree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{filepath.Join(root, "a.txt"): "a", filepath.Join(root, "sub", "b.txt"): "b", filepath.Join(outside, "secret"): "secret"} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"in-link": "a.txt", "abs-link": filepath.Join(outside, "secret"), "rel-link": "../outside/secret", "dir-link": outside} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func mustAccess(t *testing.T, cfg AccessConfig) *Access {
	t.Helper()
	a, err := NewAccess(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// isDenied checks err is the policy's generic refusal of name.
func isDenied(t *testing.T, what string, err error, name string) {
	t.Helper()
	var d *DeniedError
	if !errors.Is(err, ErrNotAllowed) || !errors.As(err, &d) || err.Error() != `"`+name+`": not allowed` && !strings.HasSuffix(err.Error(), `"`+name+`": not allowed`) {
		t.Errorf("%s: %v, want %q: not allowed", what, err, name)
	}
}

func TestAccessReadsOnlyUnderRoots(t *testing.T) {
	root, outside := accessTree(t)
	a := mustAccess(t, AccessConfig{Roots: []string{root}})
	ctx := context.Background()
	read := func(name string) (string, error) {
		f, err := a.Open(ctx, name, Config{})
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
		return string(b), err
	}
	for _, name := range []string{filepath.Join(root, "a.txt"), "a.txt", "./a.txt", "sub/b.txt", "in-link"} {
		if got, err := read(name); err != nil || (got != "a" && got != "b") {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	for _, name := range []string{
		filepath.Join(outside, "secret"), filepath.Join(outside, "nothing"), "abs-link", "rel-link", "dir-link/secret",
		filepath.Join(root, "..", "outside", "secret"), "../outside/secret", "sub/../a.txt",
		"/proc/self/root" + filepath.Join(outside, "secret"), "/proc/self/environ", "/etc/passwd",
	} {
		_, err := read(name)
		isDenied(t, name, err, name)
		_, err = a.Stat(name)
		isDenied(t, "stat "+name, err, name)
	}
	// Absent under the root: not found (the root's contents are the
	// reader's to know).
	if _, err := read("nothing.txt"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotAllowed) {
		t.Errorf("absent under the root: %v", err)
	}
	if _, err := a.Stat("sub/nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat absent: %v", err)
	}

	// Globs: within the root, as the spec names them; a directory linked
	// out is refused, not an empty match.
	got, err := a.Glob(ctx, filepath.Join(root, "*.txt"), Config{})
	if err != nil || !reflect.DeepEqual(got, []string{filepath.Join(root, "a.txt")}) {
		t.Errorf("glob: %v, %v", got, err)
	}
	if got, err = a.Glob(ctx, "*/*.txt", Config{}); err != nil || !reflect.DeepEqual(got, []string{"sub/b.txt"}) {
		t.Errorf("relative glob: %v, %v", got, err)
	}
	if got, err = a.Glob(ctx, "nothing*", Config{}); err != nil || len(got) != 0 {
		t.Errorf("glob matching nothing: %v, %v", got, err)
	}
	_, err = a.Glob(ctx, "dir-link/*", Config{})
	isDenied(t, "glob through a link out", err, "dir-link/*")
	_, err = a.Glob(ctx, filepath.Join(outside, "*"), Config{})
	isDenied(t, "glob outside", err, filepath.Join(outside, "*"))
	if _, err := a.ReadDir("dir-link"); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("readdir of a link out: %v", err)
	}
	var walked []string
	if err := a.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		walked = append(walked, p)
		return err
	}); err != nil || len(walked) != 8 {
		t.Errorf("walk: %v, %v", walked, err)
	}

	// Only one root's relative paths: the first.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "c.txt"), []byte("c"), 0o644)
	two := mustAccess(t, AccessConfig{Roots: []string{root, other}})
	if _, err := two.Stat(filepath.Join(other, "c.txt")); err != nil {
		t.Errorf("absolute under the second root: %v", err)
	}
	if _, err := two.Stat("c.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("relative names the first root: %v", err)
	}
	// No roots: nothing.
	none := mustAccess(t, AccessConfig{})
	_, err = none.Stat("a.txt")
	isDenied(t, "no roots", err, "a.txt")
}

func TestAccessRefusesRootsHoldingSecrets(t *testing.T) {
	base := t.TempDir()
	data, keys := filepath.Join(base, "data"), filepath.Join(base, "data", "node")
	os.MkdirAll(keys, 0o700)
	key := filepath.Join(base, "tls.key")
	os.WriteFile(key, []byte("k"), 0o600)
	prot := []Protected{{Path: keys, What: "the node's data dir"}, {Path: key, What: "the node's TLS key"}}
	for _, c := range []struct {
		roots []string
		want  string
	}{
		{[]string{data}, "holds the node's data dir"},
		{[]string{base}, "holds the node's"},
		{[]string{filepath.Join(keys)}, "lies inside the node's data dir"},
		{[]string{"/"}, "/proc"},
		{[]string{"/proc/self"}, "/proc"},
		{[]string{filepath.Join(base, "nothing")}, "no such file"},
		{[]string{key}, "not a directory"},
	} {
		_, err := NewAccess(AccessConfig{Roots: c.roots, Protected: prot})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("roots %v: %v, want an error saying %q", c.roots, err, c.want)
		}
	}
	// Through a link to it, too.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(data, link)
	if _, err := NewAccess(AccessConfig{Roots: []string{link}, Protected: prot}); err == nil {
		t.Error("a root named by a link to a directory holding the data dir was accepted")
	}
}

// TestImplicitRootLeavesSecretsOut: a node's default root (its current
// directory in dev mode) may hold its data dir and keys: they are left out
// of it, whatever name reaches them (relative, absolute, a link inside the
// root, a hard link), and globs do not list them.
func TestImplicitRootLeavesSecretsOut(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "d1", "raft"), 0o700)
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	for p, s := range map[string]string{"d1/node-name": "n1", "d1/raft/raft.db": "log", "node.key": "KEY", "data/x.txt": "x"} {
		os.WriteFile(filepath.Join(dir, p), []byte(s), 0o600)
	}
	os.Symlink("node.key", filepath.Join(dir, "key-link"))
	os.Symlink("d1", filepath.Join(dir, "dir-link"))
	os.Link(filepath.Join(dir, "node.key"), filepath.Join(dir, "hard-link"))
	a := mustAccess(t, AccessConfig{ImplicitRoot: dir, Protected: []Protected{
		{Path: filepath.Join(dir, "d1"), What: "the node's data dir"}, {Path: filepath.Join(dir, "node.key"), What: "the node's TLS key"}}})
	if !strings.Contains(a.String(), "without d1") {
		t.Errorf("policy: %s", a)
	}
	if _, err := a.Stat("data/x.txt"); err != nil {
		t.Errorf("data: %v", err)
	}
	for _, name := range []string{"node.key", filepath.Join(dir, "node.key"), "d1/node-name", "d1/raft/raft.db", "d1/nothing", "d1",
		"key-link", "hard-link", "dir-link/node-name", "d1/*"} {
		_, err := a.OpenFile(name)
		isDenied(t, name, err, name)
	}
	ctx := context.Background()
	for _, pat := range []string{"*", "*/*", "*/*/*", "*.key"} {
		got, err := a.Glob(ctx, pat, Config{})
		if err != nil {
			t.Errorf("%s: %v", pat, err)
		}
		for _, m := range got {
			if m == "node.key" || strings.HasPrefix(m, "d1") {
				t.Errorf("%s lists %s", pat, m)
			}
		}
	}
	ents, _ := a.ReadDir(".")
	for _, e := range ents {
		if e.Name() == "d1" || e.Name() == "node.key" {
			t.Errorf("readdir lists %s", e.Name())
		}
	}
	// An implicit root inside the data dir is no root.
	in := mustAccess(t, AccessConfig{ImplicitRoot: filepath.Join(dir, "d1"), Protected: []Protected{{Path: filepath.Join(dir, "d1"), What: "the node's data dir"}}})
	if _, err := in.Stat("node-name"); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("inside the data dir: %v", err)
	}
}

func TestHostPolicyEntries(t *testing.T) {
	p, err := newHostPolicy([]string{"data.example.com", "*.cdn.example.org", "10.1.0.0/16", "192.0.2.7", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr
	for _, c := range []struct {
		ip     string
		byName bool
		ok     bool
	}{
		{"93.184.216.34", true, true}, {"93.184.216.34", false, false},
		{"127.0.0.1", true, false}, {"10.0.0.1", true, false}, {"10.1.2.3", false, true}, {"169.254.169.254", true, false},
		{"192.168.1.1", true, false}, {"100.64.0.1", true, false}, {"::ffff:127.0.0.1", true, false}, {"::1", false, true},
		{"fe80::1", true, false}, {"fd00::1", true, false}, {"64:ff9b::7f00:1", true, false}, {"192.0.2.7", false, true},
	} {
		if ok, why := p.addrAllowed(ip(c.ip), c.byName); ok != c.ok {
			t.Errorf("%s (by name %v): %v (%s), want %v", c.ip, c.byName, ok, why, c.ok)
		}
	}
	for host, want := range map[string]bool{"data.example.com": true, "DATA.example.com.": true, "x.cdn.example.org": true, "cdn.example.org": false, "evil.com": false} {
		if p.nameAllowed(host) != want {
			t.Errorf("name %s: %v", host, !want)
		}
	}
	for _, bad := range []string{"http://x.com", "https://x.com/data/", "x.com:443", "10.0.0.0/33", "x/y", "a..b"} {
		_, err := newHostPolicy([]string{bad})
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if strings.Contains(bad, "://") && !strings.Contains(err.Error(), "no scheme, port or path") {
			t.Errorf("%q: %v, want a message saying no scheme", bad, err)
		}
	}
}

// TestDNSRebinding: a name the list allows is resolved once per
// connection and the connection made to the addresses checked: a name
// that resolves to a public address, then to loopback (a rebinding
// attacker's DNS) is refused the second time, never connected to
// 127.0.0.1; of a name resolving to both, only the public one is dialed.
func TestDNSRebinding(t *testing.T) {
	p, err := newHostPolicy([]string{"data.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	var lookups atomic.Int32
	answers := [][]string{{"203.0.113.7"}, {"127.0.0.1"}, {"127.0.0.1", "203.0.113.8"}}
	p.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range answers[int(lookups.Add(1))-1] {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}
	var mu sync.Mutex
	var dialed []string
	p.dial = func(_ context.Context, _, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		c, s := net.Pipe()
		s.Close()
		return c, nil
	}
	ctx := context.Background()
	if c, err := p.dialContext(ctx, "tcp", "data.example.com:443"); err != nil {
		t.Fatalf("first: %v", err)
	} else {
		c.Close()
	}
	if _, err := p.dialContext(ctx, "tcp", "data.example.com:443"); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("rebound to loopback: %v, want not allowed", err)
	}
	if c, err := p.dialContext(ctx, "tcp", "data.example.com:443"); err != nil {
		t.Fatalf("both: %v", err)
	} else {
		c.Close()
	}
	if _, err := p.dialContext(ctx, "tcp", "evil.example.net:443"); !errors.Is(err, ErrNotAllowed) || lookups.Load() != 3 {
		t.Fatalf("a name not in the list: %v (it must not even be resolved: %d lookups)", err, lookups.Load())
	}
	if want := []string{"203.0.113.7:443", "203.0.113.8:443"}; !reflect.DeepEqual(dialed, want) {
		t.Fatalf("dialed %v, want %v", dialed, want)
	}
}

// TestRedirectHopRefused: an allowed server's redirect to an internal
// service (another loopback address) is refused at the hop: the internal
// service gets no request, and the answer names only the spec's URL.
func TestRedirectHopRefused(t *testing.T) {
	var internalHits atomic.Int32
	internal := serveOn(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		w.Write([]byte("secret"))
	}))
	allowed := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, internal+"/secret", http.StatusFound)
			return
		}
		http.ServeContent(w, r, "x", time.Time{}, strings.NewReader("public"))
	}))
	a := mustAccess(t, AccessConfig{AllowHosts: []string{"127.0.0.1/32"}})
	ctx := context.Background()
	f, err := a.Open(ctx, allowed+"/data", Config{MaxRetries: -1})
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	f.Close()
	_, err = a.Open(ctx, allowed+"/moved", Config{MaxRetries: -1})
	isDenied(t, "redirect", err, allowed+"/moved")
	if strings.Contains(err.Error(), "127.0.0.2") {
		t.Errorf("the answer names the hop: %v", err)
	}
	_, err = a.Open(ctx, internal+"/secret", Config{MaxRetries: -1})
	isDenied(t, "direct", err, internal+"/secret")
	_, err = a.Open(ctx, "ftp://127.0.0.1/x", Config{})
	if err == nil {
		t.Error("ftp opened")
	}
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests", n)
	}
}

func serveOn(t *testing.T, ip string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("listen on %s: %v", ip, err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

func TestNamedStores(t *testing.T) {
	s, err := ParseNamedStore("minio=endpoint=http://minio.internal:9000,region=us-east-1,path_style=true,access_key_env=HOME,secret_key_env=HOME")
	if err != nil {
		t.Fatal(err)
	}
	want := NamedStore{Name: "minio", Endpoint: "http://minio.internal:9000", Region: "us-east-1", PathStyle: true, Credentials: Credentials{AccessKeyEnv: "HOME", SecretKeyEnv: "HOME"}}
	if s != want {
		t.Fatalf("%+v", s)
	}
	for _, bad := range []string{"=endpoint=x", "Bad=endpoint=x", "a=endpoint=ftp://x", "a=path_style=maybe", "a=colour=red", "a=access_key_env=X",
		"a=credentials_file=/nonexistent/creds", "a=anonymous=true,profile=p", "a/b=endpoint=x"} {
		if _, err := ParseNamedStore(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	node := mustAccess(t, AccessConfig{Stores: []NamedStore{s}})
	st, bucket, key, err := node.s3("s3://minio/train/a/b.parquet", Config{ChunkBytes: 1 << 20})
	if err != nil || bucket != "train" || key != "a/b.parquet" || st.cfg.Endpoint != s.Endpoint || !st.cfg.PathStyle || st.cfg.ChunkBytes != 1<<20 {
		t.Fatalf("s3://NAME/bucket/key: %+v %s %s %v", st, bucket, key, err)
	}
	if _, bucket, key, err = node.s3("s3://train/a/b.parquet", Config{Store: "minio"}); err != nil || bucket != "train" || key != "a/b.parquet" {
		t.Fatalf("store: NAME: %s %s %v", bucket, key, err)
	}
	for _, c := range []struct {
		url string
		cfg Config
	}{
		{"s3://train/a/b.parquet", Config{}},                           // no such store: not the environment's S3 on a node
		{"s3://other/train/a.parquet", Config{}},                       // another name
		{"s3://train/a.parquet", Config{Store: "nope"}},                // store: an unknown name
		{"s3://minio/train/a.parquet", Config{Endpoint: "http://x:1"}}, // a spec's endpoint
	} {
		_, _, _, err := node.s3(c.url, c.cfg)
		isDenied(t, c.url, err, c.url)
	}
	// A user's own process: the environment's S3 for a bucket that names
	// no store.
	if _, bucket, _, err := Local().s3("s3://train/a.parquet", Config{}); err != nil || bucket != "train" {
		t.Fatalf("local: %s %v", bucket, err)
	}
	if files := (NamedStore{Name: "x", Credentials: Credentials{File: "/etc/creds"}}).CredentialsFiles(); !reflect.DeepEqual(files, []string{"/etc/creds"}) {
		t.Errorf("credentials files: %v", files)
	}
}

// TestHardLinkToRotatedKey: the protected files' identities are kept for
// a second (protectedRecheck), but a file with several links is compared
// with identities taken when it is opened: a key replaced by a new file
// (rotated) after the policy was made, then hard-linked into a root, is
// refused at once, by Open, OpenFile and Stat alike.
func TestHardLinkToRotatedKey(t *testing.T) {
	base := t.TempDir()
	root, keys := filepath.Join(base, "root"), filepath.Join(base, "keys")
	for _, d := range []string{root, keys} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(keys, "tls.key")
	if err := os.WriteFile(key, []byte("old key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := mustAccess(t, AccessConfig{Roots: []string{root}, Protected: []Protected{{Path: key, What: "the node's TLS key"}}})
	for range 3 { // the identities are taken, then reused
		f, err := a.OpenFile(filepath.Join(root, "a.txt"))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// Rotate: a new file renamed over the key (a new inode).
	if err := os.WriteFile(key+".new", []byte("new key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(key+".new", key); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "copy")
	if err := os.Link(key, link); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if f, err := a.OpenFile(link); err == nil {
		f.Close()
		t.Error("OpenFile: a hard link to the rotated key was opened")
	} else {
		isDenied(t, "OpenFile", err, link)
	}
	if _, err := a.Stat(link); err == nil {
		t.Error("Stat: a hard link to the rotated key was allowed")
	}
	if f, err := a.Open(context.Background(), link, Config{}); err == nil {
		f.Close()
		t.Error("Open: a hard link to the rotated key was opened")
	}
}
