package formats

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/tensor"
)

const pyShard = "testdata/webdataset/shard-000000.tar"

// sampleMap is a sample's tensors as name → contents.
func sampleMap(t testing.TB, e tensor.Element) map[string]string {
	t.Helper()
	m := map[string]string{}
	for i := range e.Tensors {
		tt := &e.Tensors[i]
		if tt.DType != tensor.Bytes || len(tt.Shape) != 0 {
			t.Fatalf("tensor %q is %s%v, want a bytes scalar", tt.Name, tt.DType, tt.Shape)
		}
		m[tt.Name] = string(tt.Entry(0))
	}
	return m
}

// TestWebDatasetPythonShard reads a shard written by Python's tarfile
// (scripts/webdataset-testdata.py): members grouped by key, directories and
// names without an extension skipped, PAX long and non-ASCII names.
func TestWebDatasetPythonShard(t *testing.T) {
	els, err := readAllFiles(t, FilesOptions{Paths: []string{pyShard}, Format: FormatWebDataset})
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	for _, e := range els {
		got = append(got, sampleMap(t, e))
		if e.Tensors[0].Name != WebDatasetKey {
			t.Fatalf("first tensor %q, want %s", e.Tensors[0].Name, WebDatasetKey)
		}
	}
	want := []map[string]string{
		{"__key__": "000000", "jpg": "\xff\xd8\xff\xe0 not really a jpeg 0", "cls": "3", "json": `{"caption": "a cat"}`},
		{"__key__": "000001", "jpg": "\xff\xd8\xff\xe0 not really a jpeg 1", "cls": "7", "json": `{"caption": "a dog"}`},
		{"__key__": "sub/000002", "seg.png": "\x89PNG segmentation", "cls": "1"},
		{"__key__": "000003", "cls": "", "txt": "ünïcödé text, 中文"},
		{"__key__": "long/" + strings.Repeat("x", 120), "txt": "long name"},
		{"__key__": "ünï/0004", "txt": "unicode key"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestWebDatasetPythonWrites: shards written by python3 now (several, of
// many samples) read back whole, one split each.
func TestWebDatasetPythonWrites(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("FEEDMESH_REQUIRE_PYTHON") != "" {
			t.Fatal("python3 not found")
		}
		t.Skip("python3 not found")
	}
	dir := t.TempDir()
	counts := []int{0, 1, 250, 1000}
	for i, n := range counts {
		out, err := exec.Command(py, "../../scripts/webdataset-testdata.py", "--samples", fmt.Sprint(n), filepath.Join(dir, fmt.Sprintf("s-%d.tar", i))).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	o := FilesOptions{Paths: []string{filepath.Join(dir, "*.tar")}, Format: FormatWebDataset}
	splits, err := FileSplits(o)
	if err != nil || len(splits) != len(counts) {
		t.Fatalf("splits %v, %v; want one per shard", splits, err)
	}
	for i, s := range splits {
		it, err := OpenFiles(context.Background(), o, s)
		if err != nil {
			t.Fatal(err)
		}
		els, err := drain(t, it)
		if err != nil {
			t.Fatal(err)
		}
		if len(els) != counts[i] {
			t.Fatalf("%s: %d samples, want %d", s.Path, len(els), counts[i])
		}
		for j, e := range els {
			m := sampleMap(t, e)
			want := map[string]string{"__key__": fmt.Sprintf("%06d", j), "cls": fmt.Sprint(j % 10), "txt": strings.Repeat(fmt.Sprintf("sample %d ", j), j%7)}
			if !reflect.DeepEqual(m, want) {
				t.Fatalf("%s sample %d: got %q, want %q", s.Path, j, m, want)
			}
		}
	}
}

type tarEntry struct {
	name string
	data string
	kind byte
}

func writeTar(t testing.TB, entries []tarEntry, close bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if e.kind != 0 {
			h.Typeflag, h.Size = e.kind, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if close {
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
	} else if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readShard(t testing.TB, data []byte, skip bool) ([]tensor.Element, int64, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shard.tar")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	o := FilesOptions{Paths: []string{p}, Format: FormatWebDataset, SkipCorrupt: skip, MaxRecordBytes: 1 << 20}
	it, err := OpenFiles(context.Background(), o, Split{Path: p, End: -1})
	if err != nil {
		return nil, 0, err
	}
	els, err := drain(t, it)
	return els, it.(interface{ Skipped() int64 }).Skipped(), err
}

func TestWebDatasetTruncated(t *testing.T) {
	whole, err := os.ReadFile(pyShard)
	if err != nil {
		t.Fatal(err)
	}
	// Every cut of the Python shard is refused, naming the file and an
	// offset, unless it only drops padding after the end marker.
	ends := 0
	for cut := 0; cut < len(whole); cut += 97 {
		_, _, err := readShard(t, whole[:cut], false)
		var re *RecordError
		switch {
		case err == nil:
			ends++
		case !errors.As(err, &re) || !errors.Is(err, ErrTruncatedRecord) || re.Offset < 0 || !strings.Contains(err.Error(), "shard.tar: offset "):
			t.Fatalf("cut at %d: got %v, want a truncation error naming the file and offset", cut, err)
		case !strings.Contains(err.Error(), "truncated tar"):
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	if ends == 0 {
		t.Fatal("no cut kept the end-of-archive marker: the loop tested nothing valid")
	}
	// Cut inside a member's data: the message names that member.
	_, _, err = readShard(t, whole[:512+10], false)
	if err == nil || !strings.Contains(err.Error(), `offset 0: truncated tar: member "000000.jpg" (24 bytes) at offset 0 is cut short (the file ends at 522)`) {
		t.Fatalf("got %v", err)
	}
	// skip_corrupt keeps the samples before the cut and counts the broken one.
	data := writeTar(t, []tarEntry{{name: "a.txt", data: "1"}, {name: "b.txt", data: "2"}, {name: "c.txt", data: strings.Repeat("3", 600)}}, true)
	cut := bytes.Index(data, []byte("333")) + 100 // inside c.txt's data
	els, skipped, err := readShard(t, data[:cut], true)
	if err != nil || len(els) != 2 || skipped != 1 {
		t.Fatalf("skip_corrupt: %d samples, %d skipped, %v; want 2, 1, nil", len(els), skipped, err)
	}
	// A shard cut exactly at a member boundary (no end-of-archive marker).
	_, _, err = readShard(t, writeTar(t, []tarEntry{{name: "a.txt", data: "1"}}, false), false)
	if err == nil || !strings.Contains(err.Error(), "offset 1024: truncated tar: the shard ends without its end-of-archive marker") {
		t.Fatalf("got %v", err)
	}
}

func TestWebDatasetBadShards(t *testing.T) {
	corrupt := writeTar(t, []tarEntry{{name: "a.txt", data: "1"}, {name: "b.txt", data: "2"}}, true)
	corrupt[1024+148] ^= 0xff // the second header's checksum
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"corrupt header", corrupt, "offset 1024: corrupt tar header"},
		{"duplicate extension", writeTar(t, []tarEntry{{name: "a.txt", data: "1"}, {name: "a.txt", data: "2"}}, true), `offset 1024: sample "a" has two members with extension "txt"`},
		{"reserved", writeTar(t, []tarEntry{{name: "a.__key__", data: "1"}}, true), `member extension "__key__" is reserved`},
		{"too large", writeTar(t, []tarEntry{{name: "a.bin", data: strings.Repeat("x", 1<<20+1)}}, true), "exceeds max_record_bytes"},
		{"sample too large", writeTar(t, []tarEntry{{name: "a.x", data: strings.Repeat("x", 600<<10)}, {name: "a.y", data: strings.Repeat("x", 600<<10)}}, true), `sample "a": 1228800 bytes exceed max_record_bytes`},
		{"not a tar", []byte(strings.Repeat("hello world\n", 100)), "offset 0: corrupt tar header"},
		{"empty file", nil, "offset 0: truncated tar"},
	}
	for _, c := range cases {
		_, _, err := readShard(t, c.data, false)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "shard.tar") {
			t.Errorf("%s: got %v, want %q naming the file", c.name, err, c.want)
		}
	}
	// Skipped entries; an empty archive is an empty shard.
	els, _, err := readShard(t, writeTar(t, []tarEntry{{name: "d/", kind: tar.TypeDir}, {name: ".hidden", data: "x"}, {name: "noext", data: "x"}, {name: "trailingdot.", data: "x"}, {name: "l.txt", kind: tar.TypeSymlink}}, true), false)
	if err != nil || len(els) != 0 {
		t.Fatalf("got %d samples, %v; want none", len(els), err)
	}
	if err := (FilesOptions{Paths: []string{"x"}, Format: FormatWebDataset, SplitBytes: 10}).Validate(); err == nil || !strings.Contains(err.Error(), "split_bytes: webdataset shards are read whole") {
		t.Fatalf("split_bytes: %v", err)
	}
}

func TestSplitKey(t *testing.T) {
	cases := map[string][3]string{
		"000123.jpg":         {"000123", "jpg", "ok"},
		"a/b/000123.seg.png": {"a/b/000123", "seg.png", "ok"},
		"a.b/c.txt":          {"a.b/c", "txt", "ok"},
		"noext":              {"", "", ""},
		".hidden":            {"", "", ""},
		"dot.":               {"", "", ""},
	}
	for in, want := range cases {
		k, e, ok := splitKey(in)
		if k != want[0] || e != want[1] || ok != (want[2] == "ok") {
			t.Errorf("%q: %q %q %v", in, k, e, ok)
		}
	}
}

func FuzzWebDatasetReader(f *testing.F) {
	py, err := os.ReadFile(pyShard)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(py, false)
	f.Add(py[:700], true)
	f.Add(writeTar(f, []tarEntry{{name: "a.txt", data: "1"}, {name: "a.cls", data: "2"}, {name: "b.txt", data: "3"}}, true), false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		els, _, err := readShard(t, data, skip)
		var re *RecordError
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("error without file and offset: %v", err)
		}
		if skip && err != nil && (errors.Is(err, ErrTruncatedRecord) || errors.Is(err, ErrCorruptRecord)) {
			t.Fatalf("skip_corrupt returned %v", err)
		}
		for _, e := range els {
			if len(e.Tensors) < 2 || e.Tensors[0].Name != WebDatasetKey {
				t.Fatalf("sample %+v", e)
			}
		}
	})
}
