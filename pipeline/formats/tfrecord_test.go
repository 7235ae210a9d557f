package formats

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// crc32cBitwise is CRC32C from its definition: reflected polynomial
// 0x82F63B78, initial value and final xor 0xFFFFFFFF, one bit at a time.
// It is independent of hash/crc32, which the reader uses.
func crc32cBitwise(b []byte) uint32 {
	crc := uint32(0xFFFFFFFF)
	for _, c := range b {
		crc ^= uint32(c)
		for k := 0; k < 8; k++ {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func maskTest(crc uint32) uint32 { return ((crc >> 15) | (crc << 17)) + 0xa282ead8 }

// frameTest builds a record's bytes by hand from the definitions.
func frameTest(data []byte) []byte {
	var out []byte
	out = binary.LittleEndian.AppendUint64(out, uint64(len(data)))
	out = binary.LittleEndian.AppendUint32(out, maskTest(crc32cBitwise(out[:8])))
	out = append(out, data...)
	return binary.LittleEndian.AppendUint32(out, maskTest(crc32cBitwise(data)))
}

func TestCRC32CDefinition(t *testing.T) {
	// The standard check value of CRC-32C (iSCSI) for "123456789".
	if got := crc32cBitwise([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("bitwise crc32c check = %#x, want 0xe3069283", got)
	}
	for _, s := range []string{"", "a", "123456789", strings.Repeat("feedmesh", 100)} {
		if got, want := MaskedCRC32C([]byte(s)), maskTest(crc32cBitwise([]byte(s))); got != want {
			t.Fatalf("MaskedCRC32C(%q) = %#x, want %#x", s, got, want)
		}
	}
}

func TestTFRecordKnownAnswer(t *testing.T) {
	// A record holding "hello": the exact bytes TensorFlow writes.
	want := frameTest([]byte("hello"))
	// Spot-check the framing itself: length 5, then the masked CRC of the
	// eight length bytes.
	if !bytes.Equal(want[:8], []byte{5, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("length field %x", want[:8])
	}
	var buf bytes.Buffer
	if err := WriteTFRecord(&buf, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("WriteTFRecord = %x, want %x", buf.Bytes(), want)
	}
	// Read hand-made bytes (including an empty record).
	dir := t.TempDir()
	records := [][]byte{[]byte("hello"), {}, bytes.Repeat([]byte{0xab}, 70000), []byte("world")}
	var file []byte
	for _, r := range records {
		file = append(file, frameTest(r)...)
	}
	p := filepath.Join(dir, "data.tfrecord")
	if err := os.WriteFile(p, file, 0o644); err != nil {
		t.Fatal(err)
	}
	els, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatTFRecord})
	if err != nil {
		t.Fatal(err)
	}
	if len(els) != len(records) {
		t.Fatalf("read %d records, want %d", len(els), len(records))
	}
	for i, e := range els {
		r, _ := e.Get("record")
		if !bytes.Equal(r.Entry(0), records[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}

func writeTFRecords(t testing.TB, path string, records [][]byte) []int64 {
	t.Helper()
	var buf bytes.Buffer
	var offsets []int64
	for _, r := range records {
		offsets = append(offsets, int64(buf.Len()))
		if err := WriteTFRecord(&buf, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return offsets
}

func TestTFRecordCorruption(t *testing.T) {
	dir := t.TempDir()
	records := [][]byte{[]byte("first record"), []byte("second record"), []byte("third")}
	good := filepath.Join(dir, "good.tfrecord")
	offs := writeTFRecords(t, good, records)
	raw, _ := os.ReadFile(good)

	cases := []struct {
		name     string
		mutate   func([]byte) []byte
		sentinel error
		msg      string
		okBefore int   // records read before the error
		skipRead int   // records read in skip mode
		skipped  int64 // records skipped in skip mode
	}{
		{"data CRC", func(b []byte) []byte { b[offs[1]+12] ^= 1; return b }, ErrCorruptRecord,
			fmt.Sprintf("offset %d: corrupt record (data CRC mismatch)", offs[1]), 1, 2, 1},
		{"data CRC field", func(b []byte) []byte { b[offs[2]-1] ^= 0x80; return b }, ErrCorruptRecord,
			fmt.Sprintf("offset %d: corrupt record (data CRC mismatch)", offs[1]), 1, 2, 1},
		{"length CRC", func(b []byte) []byte { b[offs[1]+9] ^= 4; return b }, ErrCorruptRecord,
			fmt.Sprintf("offset %d: corrupt record (length CRC mismatch)", offs[1]), 1, 2, 1},
		{"length", func(b []byte) []byte { b[offs[1]+1] ^= 4; return b }, ErrCorruptRecord,
			fmt.Sprintf("offset %d: corrupt record (length CRC mismatch)", offs[1]), 1, 2, 1},
		{"truncated in header", func(b []byte) []byte { return b[:offs[2]+5] }, ErrTruncatedRecord,
			fmt.Sprintf("offset %d: truncated record", offs[2]), 2, 2, 1},
		{"truncated in data", func(b []byte) []byte { return b[:offs[2]+14] }, ErrTruncatedRecord,
			fmt.Sprintf("offset %d: truncated record", offs[2]), 2, 2, 1},
		{"truncated in data CRC", func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncatedRecord,
			fmt.Sprintf("offset %d: truncated record", offs[2]), 2, 2, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "data.tfrecord")
			if err := os.WriteFile(p, c.mutate(append([]byte(nil), raw...)), 0o644); err != nil {
				t.Fatal(err)
			}
			els, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatTFRecord})
			if !errors.Is(err, c.sentinel) {
				t.Fatalf("got %v, want %v", err, c.sentinel)
			}
			if want := p + ": " + c.msg; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %q, want prefix %q", err, want)
			}
			if len(els) != c.okBefore {
				t.Fatalf("read %d records before the error, want %d", len(els), c.okBefore)
			}
			var re *RecordError
			if !errors.As(err, &re) || re.Path != p {
				t.Fatalf("want a *RecordError naming %s, got %#v", p, err)
			}

			o := FilesOptions{Paths: []string{p}, Format: FormatTFRecord, SkipCorrupt: true}
			splits, err := FileSplits(o)
			if err != nil {
				t.Fatal(err)
			}
			it, err := OpenFiles(context.Background(), o, splits[0])
			if err != nil {
				t.Fatal(err)
			}
			els, err = drain(t, it)
			if err != nil {
				t.Fatalf("skip mode: %v", err)
			}
			if len(els) != c.skipRead {
				t.Fatalf("skip mode read %d, want %d", len(els), c.skipRead)
			}
			if got := it.(interface{ Skipped() int64 }).Skipped(); got != c.skipped {
				t.Fatalf("Skipped() = %d, want %d", got, c.skipped)
			}
		})
	}
}

func TestTFRecordHugeLengthDoesNotAllocate(t *testing.T) {
	// A header with a valid CRC claiming 2^60 bytes: truncated, not OOM.
	var hdr []byte
	hdr = binary.LittleEndian.AppendUint64(hdr, 1<<60)
	hdr = binary.LittleEndian.AppendUint32(hdr, MaskedCRC32C(hdr))
	p := filepath.Join(t.TempDir(), "huge.tfrecord")
	os.WriteFile(p, append(hdr, 1, 2, 3, 4), 0o644)
	_, err := readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatTFRecord})
	if !errors.Is(err, ErrTruncatedRecord) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("got %v", err)
	}
	// Within the file but above MaxRecordBytes.
	var buf bytes.Buffer
	WriteTFRecord(&buf, make([]byte, 100))
	os.WriteFile(p, buf.Bytes(), 0o644)
	_, err = readAllFiles(t, FilesOptions{Paths: []string{p}, Format: FormatTFRecord, MaxRecordBytes: 50})
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("got %v, want ErrRecordTooLarge", err)
	}
}

func TestTFRecordSkipResyncsAfterGarbage(t *testing.T) {
	var buf bytes.Buffer
	WriteTFRecord(&buf, []byte("a"))
	buf.Write([]byte("garbage bytes in the middle of the file"))
	WriteTFRecord(&buf, []byte("b"))
	WriteTFRecord(&buf, []byte("c"))
	p := filepath.Join(t.TempDir(), "g.tfrecord")
	os.WriteFile(p, buf.Bytes(), 0o644)
	o := FilesOptions{Paths: []string{p}, Format: FormatTFRecord, SkipCorrupt: true}
	it, err := OpenFiles(context.Background(), o, Split{Path: p, End: -1})
	if err != nil {
		t.Fatal(err)
	}
	els, err := drain(t, it)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(t, els, "record"); strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("got %v", got)
	}
	if n := it.(interface{ Skipped() int64 }).Skipped(); n != 1 {
		t.Fatalf("skipped %d, want 1", n)
	}
}

func TestTFRecordSplitsCoverEveryRecordOnce(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	var records [][]byte
	for i := 0; i < 300; i++ {
		rec := make([]byte, r.IntN(2000))
		fillRandom(r, rec)
		records = append(records, rec)
	}
	p := filepath.Join(dir, "big.tfrecord")
	writeTFRecords(t, p, records)
	for trial := 0; trial < 20; trial++ {
		o := FilesOptions{Paths: []string{p}, Format: FormatTFRecord, SplitBytes: 1 + r.Int64N(60000)}
		els, err := readAllFiles(t, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(els) != len(records) {
			t.Fatalf("split_bytes %d: %d records, want %d", o.SplitBytes, len(els), len(records))
		}
		for i, e := range els {
			rec, _ := e.Get("record")
			if !bytes.Equal(rec.Entry(0), records[i]) {
				t.Fatalf("split_bytes %d: record %d differs", o.SplitBytes, i)
			}
		}
	}
	splits, _ := FileSplits(FilesOptions{Paths: []string{p}, Format: FormatTFRecord, SplitBytes: 10000})
	if len(splits) < 5 {
		t.Fatalf("only %d splits", len(splits))
	}
}
