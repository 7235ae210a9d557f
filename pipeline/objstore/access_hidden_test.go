package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// TestDefaultRootHidesDotEntries (issue 37): the default data root of a
// dev-mode node (its current directory, ImplicitRoot) leaves out hidden
// entries, .ssh, .git, .env and any name starting with '.', named or
// reached through a link, listed by no glob or directory read; a root
// the operator names (--data-root) shows them.
func TestDefaultRootHidesDotEntries(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		".ssh/id_ed25519": "key", ".git/config": "[core]", ".env": "TOKEN=1", "data.txt": "rows", "sub/.hidden": "h", "sub/rows.txt": "r",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".ssh/id_ed25519", filepath.Join(dir, "notes")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../.env", filepath.Join(dir, "sub", "env")); err != nil {
		t.Fatal(err)
	}
	implicit, err := objstore.NewAccess(objstore.AccessConfig{ImplicitRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer implicit.Close()
	explicit, err := objstore.NewAccess(objstore.AccessConfig{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer explicit.Close()
	ctx := context.Background()
	for _, name := range []string{".ssh/id_ed25519", ".git/config", ".env", "sub/.hidden", "notes", "sub/env", filepath.Join(dir, ".env"), ".ssh/nonexistent"} {
		if f, err := implicit.OpenFile(name); !errors.Is(err, objstore.ErrNotAllowed) {
			if f != nil {
				f.Close()
			}
			t.Errorf("the default root opened %s: %v, want not allowed", name, err)
		}
		if name == ".ssh/nonexistent" {
			continue
		}
		f, err := explicit.OpenFile(name)
		if err != nil {
			t.Errorf("a named root: %s: %v", name, err)
		} else {
			f.Close()
		}
	}
	if f, err := implicit.OpenFile("data.txt"); err != nil {
		t.Errorf("the default root: data.txt: %v", err)
	} else {
		f.Close()
	}
	got, err := implicit.Glob(ctx, "*", objstore.Config{})
	if err != nil || !slices.Equal(got, []string{"data.txt", "notes", "sub"}) {
		t.Errorf("glob * in the default root: %v, %v; want data.txt, notes, sub (no hidden entry)", got, err)
	}
	if got, err := implicit.Glob(ctx, ".*", objstore.Config{}); !errors.Is(err, objstore.ErrNotAllowed) {
		t.Errorf("glob .* in the default root: %v, %v; want not allowed (a pattern naming hidden entries)", got, err)
	}
	if got, _ := explicit.Glob(ctx, ".*", objstore.Config{}); len(got) != 3 {
		t.Errorf("glob .* in a named root: %v; want .env, .git, .ssh", got)
	}
	ents, err := implicit.ReadDir("sub")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"env", "rows.txt"}) {
		t.Errorf("sub read in the default root: %v; want env, rows.txt", names)
	}
}
