package formats

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

// drain reads an iterator to the end and closes it.
func drain(t testing.TB, it Iterator) ([]tensor.Element, error) {
	t.Helper()
	defer it.Close()
	var out []tensor.Element
	for {
		e, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		for i := range e.Tensors {
			if verr := e.Tensors[i].Validate(); verr != nil {
				t.Fatalf("invalid tensor from source: %v", verr)
			}
		}
		out = append(out, e)
	}
}

// readAllFiles enumerates the splits of o and reads them all in order.
func readAllFiles(t testing.TB, o FilesOptions) ([]tensor.Element, error) {
	t.Helper()
	splits, err := FileSplits(o)
	if err != nil {
		return nil, err
	}
	var all []tensor.Element
	for _, s := range splits {
		it, err := OpenFiles(context.Background(), o, s)
		if err != nil {
			return all, err
		}
		els, err := drain(t, it)
		all = append(all, els...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func texts(t testing.TB, els []tensor.Element, name string) []string {
	t.Helper()
	var out []string
	for _, e := range els {
		tt, ok := e.Get(name)
		if !ok {
			t.Fatalf("element has no tensor %q: %+v", name, e)
		}
		out = append(out, string(tt.Entry(0)))
	}
	return out
}

func int64Of(t testing.TB, e tensor.Element, name string) int64 {
	t.Helper()
	tt, ok := e.Get(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	v, err := tt.Int64Value()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
