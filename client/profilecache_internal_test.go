package client

import (
	"os"
	"path/filepath"
	"testing"
)

// TestProfileStoreDefaultKeepsNothing (issue 42): by default offload auto
// keeps no profile anywhere, the user cache directory included, so that
// one process's measurements never change another's jobs; a file the user
// names keeps them, and a later client of that file finds them.
func TestProfileStoreDefaultKeepsNothing(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", t.TempDir())
	p := OffloadProfile{Ingest: 100, Local: 50, Rows: 300}
	for _, opt := range []string{"", "off"} {
		s := profileStoreFor(opt)
		if err := s.store("fp", p); err != nil {
			t.Fatal(err)
		}
		if _, ok := profileStoreFor(opt).load("fp"); ok {
			t.Errorf("OffloadProfiles %q: a profile was remembered", opt)
		}
	}
	filepath.WalkDir(cache, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("the default wrote %s", path)
		}
		return nil
	})
	named := filepath.Join(t.TempDir(), "profiles.json")
	if err := profileStoreFor(named).store("fp", p); err != nil {
		t.Fatal(err)
	}
	if got, ok := profileStoreFor(named).load("fp"); !ok || got.Local != p.Local {
		t.Fatalf("the named file gave %+v, %v", got, ok)
	}
}
