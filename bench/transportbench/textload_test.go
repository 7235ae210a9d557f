package transportbench

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTextPayloadRoundTrip: the payload file holds TextBatches' batches,
// padded, in order; the peers decode them back exactly; feedmesh's unpadded
// frames are smaller.
func TestTextPayloadRoundTrip(t *testing.T) {
	ctx := context.Background()
	els, err := TextBatches(ctx, 1500)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := writeTextPayload(ctx, t.TempDir(), 1500)
	if err != nil {
		t.Fatal(err)
	}
	if ts.records != len(els) || ts.records < 10 {
		t.Fatalf("%d records for %d batches", ts.records, len(els))
	}
	if !(ts.meanUnpad < ts.meanPadded) || ts.paddedRatio <= 1 {
		t.Errorf("unpadded %.0f bytes per batch, padded %.0f: unpadding saved nothing", ts.meanUnpad, ts.meanPadded)
	}
	codec, err := benchCodec()
	if err != nil {
		t.Fatal(err)
	}
	got, err := loadTextBatches(codec, ts.path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for i, g := range got {
		if err := checkTextBatch(g.el, els[i], true); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if _, ok := g.el.Get("tokens_length"); !ok {
			t.Fatalf("batch %d has no tokens_length: nothing to unpad", i)
		}
		sum += 8 + g.paddedBytes
	}
	if sum != fi.Size() || float64(sum-8*int64(len(got)))/float64(len(got)) != ts.meanPadded {
		t.Errorf("records sum to %d bytes, file has %d (mean padded %.1f)", sum, fi.Size(), ts.meanPadded)
	}

	// A changed token or shape is caught.
	bad := got[0].el
	bad.Tensors = append(bad.Tensors[:0:0], bad.Tensors...)
	tok := bad.Tensors[1]
	if tok.Name != "tokens" {
		t.Fatalf("tensor 1 is %q", tok.Name)
	}
	tok.Data = append([]byte(nil), tok.Data...)
	tok.Data[0] ^= 1
	bad.Tensors[1] = tok
	if err := checkTextBatch(bad, els[0], true); err == nil || !strings.Contains(err.Error(), "tokens") {
		t.Errorf("changed token: %v", err)
	}
	if err := checkTextBatch(bad, els[0], false); err != nil {
		t.Errorf("shape check looked at bytes: %v", err)
	}
	tok.Shape = []int64{tok.Shape[0], tok.Shape[1] + 1}
	bad.Tensors[1] = tok
	if err := checkTextBatch(bad, els[0], false); err == nil {
		t.Error("changed shape passed")
	}
}

func TestReadRecordsRejects(t *testing.T) {
	dir := t.TempDir()
	rec := func(n uint64, body int) []byte {
		b := binary.BigEndian.AppendUint64(nil, n)
		return append(b, make([]byte, body)...)
	}
	for name, data := range map[string][]byte{
		"empty":       nil,
		"zero length": rec(0, 0),
		"too large":   rec(maxRecordBytes+1, 0),
		"short body":  rec(10, 9),
		"short len":   append(rec(1, 1), 0, 0, 0),
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readRecords(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
	if _, err := readRecords(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file read")
	}
	// A record that is not a batch frame fails the feedmesh peers' decode.
	p := filepath.Join(dir, "garbage")
	if err := os.WriteFile(p, rec(16, 16), 0o600); err != nil {
		t.Fatal(err)
	}
	codec, _ := benchCodec()
	if _, err := loadTextBatches(codec, p); err == nil || !strings.Contains(err.Error(), "record 0") {
		t.Errorf("garbage record: %v", err)
	}
	if _, err := TextBatches(context.Background(), 0); err == nil {
		t.Error("TextBatches(0) accepted")
	}
}

// TestRunLoopbackText runs the text workload end to end for feedmesh (two
// peer processes: the sender unpads, the receiver re-pads and checks each
// batch), also with lz4-compressed tails (and their reference,
// encode=fresh), and for grpc-tls too when FEEDMESH_BASELINE names the
// baseline binary.
func TestRunLoopbackText(t *testing.T) {
	c := peerConfig(t)
	c.Workload, c.TextExamples, c.Seconds, c.Runs = WorkloadText, 3000, 0.3, 1
	c.Sizes = nil // ignored by the text workload
	c.Transports = []string{Feedmesh, QuicRaw}
	c.Compress = []string{"lz4"}
	if b := os.Getenv("FEEDMESH_BASELINE"); b != "" {
		c.Baseline = b
		c.Transports = append(c.Transports, GRPCTLS)
	}
	var progress strings.Builder
	c.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	want := 3 // feedmesh, encode=fresh, compress=lz4; quic-raw is left out of the text workload
	if c.Baseline != "" {
		want = 4
	}
	if len(rows) != want {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), want, progress.String())
	}
	if !strings.Contains(progress.String(), "unpadded (feedmesh)") {
		t.Errorf("progress lacks the workload line:\n%s", progress.String())
	}
	for _, r := range rows {
		if r.Workload != WorkloadText || r.Runs != 1 || len(r.Errors) > 0 || r.BatchesPerS <= 0 || r.WireBytesPerBatch <= 0 {
			t.Fatalf("row %+v", r)
		}
		// MB/s counts padded bytes: batches/s × the mean padded batch, give
		// or take the mix of batches in a partial cycle.
		if got := r.BatchesPerS * float64(r.BatchBytes) / 1e6; got < r.MBPerS*0.8 || got > r.MBPerS*1.25 {
			t.Errorf("%s: %.1f batches/s of %d bytes do not match %.1f MB/s", r.Transport, r.BatchesPerS, r.BatchBytes, r.MBPerS)
		}
		switch r.Transport {
		case Feedmesh:
			// The compressed variant ships fewer bytes than the plain
			// ones (narrowed token ids still compress a little with lz4:
			// about 7%).
			if r.Variant == "compress=lz4" && r.WireBytesPerBatch >= rows[0].WireBytesPerBatch {
				t.Errorf("compress=lz4 wrote %.0f bytes per batch, uncompressed %.0f", r.WireBytesPerBatch, rows[0].WireBytesPerBatch)
			}
			if r.WireBytesPerBatch >= float64(r.BatchBytes) {
				t.Errorf("feedmesh wrote %.0f bytes per batch, padded batches are %d", r.WireBytesPerBatch, r.BatchBytes)
			}
		case GRPCTLS:
			if r.BatchesRatioVsGRPCTLS == nil || *r.BatchesRatioVsGRPCTLS != 1 {
				t.Errorf("grpc-tls ratio %v", r.BatchesRatioVsGRPCTLS)
			}
			if r.WireBytesPerBatch < float64(r.BatchBytes)*0.8 {
				t.Errorf("grpc-tls wrote %.0f bytes per batch, padded batches are %d", r.WireBytesPerBatch, r.BatchBytes)
			}
		}
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rows); err != nil || !strings.Contains(b.String(), "WIRE B/BATCH") || !strings.Contains(b.String(), "text") {
		t.Errorf("table %q: %v", b.String(), err)
	}
}
