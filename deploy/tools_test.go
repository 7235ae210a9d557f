package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// toolBinary returns a binary of pkg built in the module tools/helm (its
// own go.mod: helm.sh/helm/v3 and k8s.io/api, which the product's go.mod
// does not name), as internal/s3test builds versitygw: once per machine
// and version of that module under the user cache dir, one build at a
// time under a file lock; the test skips when the Go module proxy cannot
// be reached to build it.
func toolBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	mod, err := filepath.Abs(filepath.Join("..", "tools", "helm"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "kubecheck/main.go"} {
		b, err := os.ReadFile(filepath.Join(mod, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	gv, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Skipf("skipped: no go toolchain to build %s: %v", name, err)
	}
	h.Write(gv)
	h.Write([]byte(runtime.GOOS + "/" + runtime.GOARCH))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "feedmesh", "helm", hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, name)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+".tmp", pkg)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(bin + ".tmp")
		msg := string(out)
		for _, s := range []string{"dial tcp", "no such host", "i/o timeout", "connection refused", "proxyconnect", "network is unreachable", "GOPROXY=off"} {
			if strings.Contains(msg, s) {
				t.Skipf("skipped: building %s needs the Go module proxy, which is unreachable: %s", name, lastLines(msg, 5))
			}
		}
		t.Fatalf("build %s in %s: %v\n%s", pkg, mod, err, lastLines(msg, 30))
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s from tools/helm in %v", name, time.Since(t0).Round(time.Second))
	return bin
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

var feedmeshBuilt struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// feedmeshBinary builds cmd/feedmesh (for its --help: the flags that
// exist).
func feedmeshBinary(t *testing.T) string {
	t.Helper()
	feedmeshBuilt.once.Do(func() {
		dir, err := os.MkdirTemp("", "feedmesh-deploy-test-")
		if err != nil {
			feedmeshBuilt.err = err
			return
		}
		feedmeshBuilt.path = filepath.Join(dir, "feedmesh")
		feedmeshBuilt.out, feedmeshBuilt.err = exec.Command("go", "build", "-o", feedmeshBuilt.path, "github.com/feedmesh/feedmesh/cmd/feedmesh").CombinedOutput()
	})
	if feedmeshBuilt.err != nil {
		t.Fatalf("go build ./cmd/feedmesh: %v\n%s", feedmeshBuilt.err, feedmeshBuilt.out)
	}
	return feedmeshBuilt.path
}

// nodeFlags are the flags `feedmesh node --help` lists, by name, with
// their environment variables.
func nodeFlags(t *testing.T) (flags, envs map[string]bool) {
	t.Helper()
	out, _ := exec.Command(feedmeshBinary(t), "node", "--help").CombinedOutput()
	flags, envs = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "-") {
			f := strings.Fields(strings.TrimLeft(line, "-"))
			if len(f) > 0 {
				flags[f[0]] = true
			}
		}
		if i := strings.Index(line, "(env FEEDMESH_"); i >= 0 {
			e := strings.TrimSuffix(strings.Fields(line[i+5:])[0], ")")
			envs[e] = true
		}
	}
	if len(flags) < 10 || len(envs) < 10 {
		t.Fatalf("feedmesh node --help lists %d flags, %d variables:\n%s", len(flags), len(envs), out)
	}
	return flags, envs
}
