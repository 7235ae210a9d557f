package mesh

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestDefaultDataRoot: with no --data-root, a node on loopback (dev mode)
// reads under its current directory; one that advertises another address,
// and one on loopback with mutual TLS (not dev mode: the operator says
// what it reads), read no local files.
func TestDefaultDataRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg := FastConfig()
	cfg.DataDir = t.TempDir()
	a, err := cfg.dataAccess(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !strings.Contains(a.String(), "data roots: "+wd) || !strings.Contains(a.String(), "hosts: none") || !strings.Contains(a.String(), "object stores: none") {
		t.Errorf("loopback: %s", a)
	}
	cfg.AdvertiseAddr, cfg.Insecure = "10.0.0.5", true
	b, err := cfg.dataAccess(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.Contains(b.String(), "local files: none") {
		t.Errorf("off loopback: %s", b)
	}
	if _, err := b.Stat("dataaccess_internal_test.go"); err == nil {
		t.Error("off loopback, a file of the current directory was read")
	}
	cfg.AdvertiseAddr, cfg.Insecure = "", false
	cfg.TLSCA, cfg.TLSCert, cfg.TLSKey = "tls/ca.crt", "tls/n1.crt", "tls/n1.key"
	m, err := cfg.dataAccess(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.Contains(m.String(), "local files: none") {
		t.Errorf("loopback with mutual TLS: %s", m)
	}
	if _, err := m.Stat("dataaccess_internal_test.go"); err == nil {
		t.Error("loopback with mutual TLS, a file of the current directory was read")
	}
}

// TestHomeRootWarnsOnce: a dev-mode node run from a home directory
// warns, once, that its default data root is one; another directory
// says nothing.
func TestHomeRootWarnsOnce(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var once sync.Once
	warnHomeRoot(log, t.TempDir(), &once)
	if buf.Len() != 0 {
		t.Fatalf("a directory that is not home: %s", buf.String())
	}
	warnHomeRoot(log, home, &once)
	warnHomeRoot(log, home+"/", &once)
	if n := strings.Count(buf.String(), "is a home directory"); n != 1 || !strings.Contains(buf.String(), "--data-root") {
		t.Fatalf("warned %d times: %s", n, buf.String())
	}
}
