package formats

import (
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

func TestCheckThrift(t *testing.T) {
	h := format.PageHeader{Type: format.DataPage, UncompressedPageSize: 100, CompressedPageSize: 80}
	h.DataPageHeader.Valid = true
	h.DataPageHeader.V.NumValues = 7
	good, err := thrift.Marshal(&thrift.CompactProtocol{}, &h)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := checkThrift(append(good, 1, 2, 3)); err != nil || n != len(good) {
		t.Fatalf("a page header: %d, %v; want %d", n, err, len(good))
	}
	for cut := range len(good) {
		if _, err := checkThrift(good[:cut]); !errors.Is(err, errThriftShort) {
			t.Errorf("cut at %d: %v, want errThriftShort", cut, err)
		}
	}
	for _, tc := range []struct {
		name  string
		b     []byte
		short bool
	}{
		{"binary longer than the bytes", []byte{0x18, 0xff, 0xff, 0xff, 0x0f, 'x'}, true},
		{"list of 2^40 i32", []byte{0x19, 0xf5, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20}, false},
		{"map of 2^40 entries", []byte{0x1b, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x55}, false},
		{"unknown type 15", []byte{0x1f}, false},
		{"varint of 11 bytes", []byte{0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, false},
		{"nested too deep", func() []byte {
			var b []byte
			for range maxThriftDepth + 2 {
				b = append(b, 0x1c) // field 1: struct
			}
			return b
		}(), false},
	} {
		_, err := checkThrift(tc.b)
		if err == nil || errors.Is(err, errThriftShort) != tc.short {
			t.Errorf("%s: %v (short: want %v)", tc.name, err, tc.short)
		}
	}
}

func TestZstdContentSize(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want uint64
		ok   bool
	}{
		{[]byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x2a}, 42, true},                   // single segment, 1-byte size
		{[]byte{0x28, 0xb5, 0x2f, 0xfd, 0x40, 0x00, 0x10, 0x00}, 16 + 256, true}, // 2-byte size, window byte
		{[]byte{0x28, 0xb5, 0x2f, 0xfd, 0x80, 0x00, 1, 0, 0, 1}, 1<<24 + 1, true},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00}, 0, false}, // no size
		{[]byte{1, 2, 3, 4, 5, 6}, 0, false},                   // not zstd
	} {
		got, ok := zstdContentSize(tc.b)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%x: %d, %v; want %d, %v", tc.b, got, ok, tc.want, tc.ok)
		}
	}
}
