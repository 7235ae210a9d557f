package objstore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkOpenSmallFile: what opening and reading a small file (an
// image_folder image, 16 KiB, nested two directories deep) costs through
// a node's policy (a data root opened with os.Root, and the node's five
// protected files compared by identity: data dir, TLS key, certificate,
// CA, gossip key), and through a default root that leaves the node's data
// dir out (symbolic links resolved too), against os.Open in the same run;
// data-root-noprot is a data root with nothing protected (os.Root alone).
// Compare the ns/op of the sub-benchmarks.
func BenchmarkOpenSmallFile(b *testing.B) {
	base := b.TempDir()
	root := filepath.Join(base, "root")
	dir := filepath.Join(root, "train", "n01440764")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	const files = 256
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.jpg", i)), make([]byte, 16<<10), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	secrets := filepath.Join(base, "node")
	os.MkdirAll(filepath.Join(secrets, "data"), 0o700)
	var prot []Protected
	for _, n := range []string{"data", "tls.key", "tls.crt", "ca.crt", "gossip.key"} {
		p := filepath.Join(secrets, n)
		if n != "data" {
			os.WriteFile(p, []byte("x"), 0o600)
		}
		prot = append(prot, Protected{Path: p, What: n})
	}
	implicitProt := append([]Protected{{Path: filepath.Join(root, "d1"), What: "data dir"}}, prot[1:]...)
	os.MkdirAll(filepath.Join(root, "d1"), 0o700)
	buf := make([]byte, 16<<10)
	readAll := func(b *testing.B, open func(string) (io.ReadCloser, error)) {
		for i := 0; b.Loop(); i++ {
			f, err := open(filepath.Join(dir, fmt.Sprintf("%04d.jpg", i%files)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(f, buf); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}
	b.Run("os.Open", func(b *testing.B) {
		readAll(b, func(p string) (io.ReadCloser, error) { return os.Open(p) })
	})
	for _, c := range []struct {
		name string
		cfg  AccessConfig
	}{
		{"data-root", AccessConfig{Roots: []string{root}, Protected: prot}},
		{"data-root-noprot", AccessConfig{Roots: []string{root}}},
		{"default-root", AccessConfig{ImplicitRoot: root, Protected: implicitProt}},
	} {
		a, err := NewAccess(c.cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			readAll(b, func(p string) (io.ReadCloser, error) { return a.OpenFile(p) })
		})
		a.Close()
	}
}
