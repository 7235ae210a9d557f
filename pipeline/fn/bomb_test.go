package fn

import (
	"bytes"
	"compress/gzip"
	"runtime"
	"strings"
	"testing"
)

// A gzip bomb (64 MiB of zeros in 64 KiB) read as a tokenizer is refused
// at the bound, having allocated about the bound, not what it inflates
// to; the same file under the bound is read whole.
func TestGzipBombBounded(t *testing.T) {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	const inflated = 64 << 20
	for i := 0; i < inflated>>20; i++ {
		zw.Write(zero)
	}
	zw.Close()
	t.Logf("bomb: %d bytes, inflating to %d", z.Len(), inflated)

	const limit = 1 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	data, err := readBounded("bomb.json.gz", bytes.NewReader(z.Bytes()), limit)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Fatalf("read %d bytes, err %v; want refused at the bound", len(data), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*limit {
		t.Fatalf("allocated %d bytes refusing it, want about the bound (%d)", alloc, limit)
	}
	data, err = readBounded("bomb.json.gz", bytes.NewReader(z.Bytes()), inflated)
	if err != nil || len(data) != inflated {
		t.Fatalf("under the bound: %d bytes, %v", len(data), err)
	}
}
