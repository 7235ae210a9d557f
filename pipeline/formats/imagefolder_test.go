package formats

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestImageFolder(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"dog/b.jpg":          "dog b",
		"dog/a.JPEG":         "dog a",
		"dog/notes.txt":      "not an image",
		"cat/x/1.png":        "cat x1",
		"cat/0.webp":         "cat 0",
		"cat/.hidden.jpg":    "hidden",
		"aardvark/only.gif":  "aardvark",
		".trash/junk.jpg":    "not a class",
		"empty_class/readme": "no images",
		"top.jpg":            "not in a class",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	els, err := readAllFiles(t, FilesOptions{Paths: []string{root}, Format: FormatImageFolder})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range els {
		img, _ := e.Get("image")
		p, _ := e.Get("path")
		rel, _ := filepath.Rel(root, string(p.Entry(0)))
		got = append(got, fmt.Sprintf("%d %s %s", int64Of(t, e, "label"), rel, img.Entry(0)))
	}
	// Classes sorted: aardvark 0, cat 1, dog 2, empty_class 3.
	want := []string{"0 aardvark/only.gif aardvark", "1 cat/0.webp cat 0", "1 cat/x/1.png cat x1", "2 dog/a.JPEG dog a", "2 dog/b.jpg dog b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestImageFolderSplits(t *testing.T) {
	root := t.TempDir()
	n := ImageFolderSplitSize + 10
	os.MkdirAll(filepath.Join(root, "a"), 0o755)
	os.MkdirAll(filepath.Join(root, "b"), 0o755)
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(root, "a", fmt.Sprintf("%05d.jpg", i)), []byte{byte(i)}, 0o644)
	}
	os.WriteFile(filepath.Join(root, "b", "z.png"), []byte("b"), 0o644)
	o := FilesOptions{Paths: []string{root}, Format: FormatImageFolder}
	splits, err := FileSplits(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 3 || splits[1].Start != int64(ImageFolderSplitSize) || splits[1].End != int64(n) || splits[2].Path != filepath.Join(root, "b") {
		t.Fatalf("splits %+v", splits)
	}
	// Each split opens on its own (a worker reads only its share).
	it, err := OpenFiles(context.Background(), o, splits[1])
	if err != nil {
		t.Fatal(err)
	}
	els, err := drain(t, it)
	if err != nil || len(els) != 10 {
		t.Fatalf("%d elements, %v", len(els), err)
	}
	// The folder shrinking under a split is an error, not a silent skip.
	os.Remove(filepath.Join(root, "a", "00000.jpg"))
	if _, err := OpenFiles(context.Background(), o, splits[1]); err == nil || !strings.Contains(err.Error(), "the folder changed since its splits were listed") {
		t.Fatalf("got %v", err)
	}
}

func TestImageFolderErrors(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "f.jpg")
	os.WriteFile(file, []byte("x"), 0o644)
	big := filepath.Join(root, "c")
	os.MkdirAll(big, 0o755)
	os.WriteFile(filepath.Join(big, "big.jpg"), make([]byte, 2000), 0o644)
	noImages := t.TempDir()
	os.MkdirAll(filepath.Join(noImages, "cls"), 0o755)
	cases := []struct {
		o    FilesOptions
		want string
	}{
		{FilesOptions{Paths: []string{root, root}, Format: FormatImageFolder}, "paths: image_folder takes exactly one root directory, got 2"},
		{FilesOptions{Paths: []string{file}, Format: FormatImageFolder}, "is not a directory"},
		{FilesOptions{Paths: []string{filepath.Join(root, "nope")}, Format: FormatImageFolder}, "no such file"},
		{FilesOptions{Paths: []string{t.TempDir()}, Format: FormatImageFolder}, "no class directories"},
		{FilesOptions{Paths: []string{noImages}, Format: FormatImageFolder}, "no images in its 1 class directories"},
		{FilesOptions{Paths: []string{root}, Format: FormatImageFolder, SplitBytes: 5}, "split_bytes: image_folder cuts every class"},
		{FilesOptions{Paths: []string{root}, Format: FormatImageFolder, MaxRecordBytes: 1000}, "big.jpg: file exceeds max_record_bytes (1000)"},
	}
	for _, c := range cases {
		_, err := readAllFiles(t, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.o, err, c.want)
		}
	}
}
