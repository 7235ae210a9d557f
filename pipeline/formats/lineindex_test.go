package formats

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"testing/iotest"
)

// referenceLines are the start offsets of the lines of s: after each
// '\n', and a last unterminated run.
func referenceLines(s string) []int64 {
	var starts []int64
	for i := 0; i < len(s); {
		starts = append(starts, int64(i))
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return starts
}

// TestBuildLineIndex: against the reference on random files (empty lines,
// CRLF, no final newline, lines longer than the scan buffer), read in
// one-byte and odd-sized pieces; and reading the file from each offset
// with the lines reader gives the indexed line first.
func TestBuildLineIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for trial := range 200 {
		var sb strings.Builder
		for range r.IntN(60) {
			switch r.IntN(6) {
			case 0: // empty line
			case 1:
				sb.WriteString(strings.Repeat("x", r.IntN(50)) + "\r")
			case 2:
				if trial%50 == 0 {
					sb.WriteString(strings.Repeat("y", lineIndexBuffer+r.IntN(100)))
				}
			default:
				sb.WriteString(strings.Repeat("a", 1+r.IntN(30)))
			}
			sb.WriteByte('\n')
		}
		if r.IntN(2) == 0 {
			sb.WriteString("tail without newline")
		}
		s := sb.String()
		want := referenceLines(s)
		every := int64(1 + r.IntN(7))
		first := r.Int64N(every)
		for _, rd := range []io.Reader{strings.NewReader(s), iotest.OneByteReader(strings.NewReader(s)), iotest.HalfReader(strings.NewReader(s))} {
			x, err := BuildLineIndex(rd, first, every)
			if err != nil {
				t.Fatal(err)
			}
			if x.Lines != int64(len(want)) {
				t.Fatalf("trial %d: %d lines, want %d", trial, x.Lines, len(want))
			}
			var wantOff []int64
			for k := first; k < int64(len(want)); k += every {
				wantOff = append(wantOff, want[k])
			}
			if !equalInt64(x.Offsets, wantOff) {
				t.Fatalf("trial %d every %d from %d: offsets %v, want %v", trial, every, first, x.Offsets, wantOff)
			}
		}
	}
	for _, bad := range [][2]int64{{0, 0}, {-1, 4}, {4, 4}} {
		if _, err := BuildLineIndex(strings.NewReader("a\n"), bad[0], bad[1]); !errors.Is(err, ErrLineIndex) {
			t.Errorf("first %d every %d: %v", bad[0], bad[1], err)
		}
	}
	if _, err := BuildLineIndex(iotest.ErrReader(io.ErrUnexpectedEOF), 0, 4); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a failing reader: %v", err)
	}
}

func equalInt64(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLineIndexAgreesWithReader: the lines reader, opened on a split that
// starts at an indexed offset, yields the indexed line first, and the
// index counts as many lines as the reader yields over the whole file.
func TestLineIndexAgreesWithReader(t *testing.T) {
	s := "alpha\n\nbeta\r\ngamma\n" + strings.Repeat("l\n", 30) + "last"
	p := writeFile(t, t.TempDir(), "f.txt", s)
	x, err := BuildLineIndex(strings.NewReader(s), 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(s, "\n")
	o := FilesOptions{Paths: []string{p}, Format: FormatLines}
	ctx := context.Background()
	count := func(sp Split) (first string, n int64) {
		it, err := OpenFiles(ctx, o, sp)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		for {
			e, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return first, n
			}
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				first = string(e.Tensors[0].Entry(0))
			}
			n++
		}
	}
	if _, n := count(Split{Path: p, End: -1}); n != x.Lines {
		t.Fatalf("the reader yields %d lines, the index counts %d", n, x.Lines)
	}
	for j, off := range x.Offsets {
		first, _ := count(Split{Path: p, Start: off, End: -1})
		line := x.First + int64(j)*x.Every
		want := strings.TrimSuffix(lines[line], "\r")
		if first != want {
			t.Fatalf("offset %d (line %d): the reader starts with %q, want %q", off, line, first, want)
		}
	}
}

// BenchmarkLineIndex: building the index of a text file against reading
// its lines (the baseline, in the same run), per byte: the index's build
// time per GB is 1 GB over its MB/s.
func BenchmarkLineIndex(b *testing.B) {
	var sb bytes.Buffer
	it, _ := OpenSynthetic(context.Background(), SyntheticOptions{Kind: "text", Count: 20000, Seed: 1}, Split{End: 20000})
	for {
		e, err := it.Next(context.Background())
		if err != nil {
			break
		}
		sb.Write(e.Tensors[0].Entry(0))
		sb.WriteByte('\n')
	}
	p := writeFile(b, b.TempDir(), "corpus.txt", sb.String())
	size := int64(sb.Len())
	b.Run("read-lines", func(b *testing.B) {
		benchFile(b, FilesOptions{Paths: []string{p}, Format: FormatLines}, size)
	})
	b.Run("index", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			x, err := BuildLineIndex(f, 0, 4096)
			f.Close()
			if err != nil || x.Lines != 20000 {
				b.Fatalf("%d lines, %v", x.Lines, err)
			}
		}
	})
}
