package transportbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Workloads: what the sender sends.
const (
	// WorkloadRaw repeats one encoded batch of random bytes of each size.
	WorkloadRaw = "raw"
	// WorkloadText cycles through real bucketed token batches (TextBatches):
	// the baselines ship them padded, feedmesh unpadded (re-padded by the
	// receiver), as the shipped worker and client do.
	WorkloadText = "text"
)

// TextSeed is the synthetic source's seed of the text workload (the one
// transport/batch's BenchmarkTextStream uses, so the batches are the same).
const TextSeed = 3

// DefaultTextExamples is the text workload's number of sentences: 346
// batches, 12.4 KB each on average padded (4.3 MB in all).
const DefaultTextExamples = 20000

// maxTextExamples bounds Config.TextExamples (memory of the harness and of
// the peers, which hold every batch).
const maxTextExamples = 1_000_000

// TextBatches runs a real NLP input pipeline — synthetic heavy-tailed text
// (seed TextSeed) → tokenize_whitespace (vocab 32000) →
// bucket_by_sequence_length (boundaries 32…512, batch sizes 64…4) — over n
// sentences and returns its batches without the raw text: what a trainer
// consumes (int32 tokens padded per bucket, tokens_length, ids). The result
// is deterministic in n. transport/batch's textbench_test.go builds the same
// batches (it cannot import this package).
func TextBatches(ctx context.Context, n int64) ([]tensor.Element, error) {
	if n < 1 || n > maxTextExamples {
		return nil, fmt.Errorf("transportbench: %d text examples out of range [1, %d]", n, maxTextExamples)
	}
	spec := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: n, Seed: TextSeed}))
	spec.Map("tokenize_whitespace", fn.Args{"vocab_size": 32000}, 1)
	spec.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: []int64{32, 64, 128, 256, 512}, BatchSizes: []int64{64, 64, 32, 16, 8, 4}})
	ss, err := pipeline.Splits(spec)
	if err != nil {
		return nil, err
	}
	it, err := pipeline.Open(ctx, spec, ss)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []tensor.Element
	for {
		el, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			if len(out) == 0 {
				return nil, errors.New("transportbench: the text pipeline produced no batch")
			}
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var keep tensor.Element
		for _, t := range el.Tensors {
			if t.Name != "text" {
				keep.Tensors = append(keep.Tensors, t)
			}
		}
		out = append(out, keep)
	}
}

// Payload files: the text workload's batches as the baselines ship them.
// A payload file is a sequence of records, each an 8-byte big-endian length
// followed by that many bytes; a record is one batch's padded frame as
// batch.Encode writes it on a stream (the codec's length prefix, the CBOR
// header and the dense tensors, padding included: what tf.data service
// ships). bench/baseline reads the same format
// (--payload-file); the feedmesh peers decode the records back to batches.
const (
	// maxRecordBytes bounds one record (the baseline's --size limit).
	maxRecordBytes = MaxBatchBytes
	// maxPayloadBytes bounds a payload file: every peer holds all of it.
	maxPayloadBytes = 1 << 30
)

// benchCodec is the codec of the shipped data path.
func benchCodec() (*transport.Codec, error) {
	cfg := transport.DefaultConfig()
	return transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
}

// textSet is the text workload as written to the payload file.
type textSet struct {
	path        string
	records     int
	meanPadded  float64 // mean record (padded frame) bytes
	meanUnpad   float64 // mean unpadded frame bytes on the stream (what feedmesh sends)
	paddedRatio float64 // meanPadded / meanUnpad
}

// writeTextPayload builds the text batches of n examples and writes their
// padded frames to a new payload file in dir.
func writeTextPayload(ctx context.Context, dir string, n int64) (textSet, error) {
	els, err := TextBatches(ctx, n)
	if err != nil {
		return textSet{}, err
	}
	codec, err := benchCodec()
	if err != nil {
		return textSet{}, err
	}
	f, err := os.CreateTemp(dir, "fm-text-payload-*.bin")
	if err != nil {
		return textSet{}, fmt.Errorf("payload file: %w", err)
	}
	ts := textSet{path: f.Name(), records: len(els)}
	fail := func(err error) (textSet, error) {
		f.Close()
		os.Remove(ts.path)
		return textSet{}, fmt.Errorf("write payload file %s: %w", ts.path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var padded, unpadded, total int64
	for i, e := range els {
		pf, err := batch.Encode(codec, batch.Header{Worker: "bench-sender", Seq: uint64(i)}, e)
		if err != nil {
			return fail(fmt.Errorf("batch %d: %w", i, err))
		}
		uf, err := batch.EncodeWith(codec, batch.Header{Worker: "bench-sender", Seq: uint64(i)}, e, batch.ShippedEncodeOptions)
		if err != nil {
			return fail(fmt.Errorf("batch %d: %w", i, err))
		}
		var rec bytes.Buffer
		if _, err := pf.WriteTo(&rec); err != nil {
			return fail(fmt.Errorf("batch %d: %w", i, err))
		}
		un, err := uf.WriteTo(io.Discard)
		if err != nil {
			return fail(fmt.Errorf("batch %d: %w", i, err))
		}
		if rec.Len() > maxRecordBytes {
			return fail(fmt.Errorf("batch %d: %d bytes, over the %d-byte record limit", i, rec.Len(), maxRecordBytes))
		}
		total += 8 + int64(rec.Len())
		if total > maxPayloadBytes {
			return fail(fmt.Errorf("over %d bytes: use fewer text examples", maxPayloadBytes))
		}
		var hdr [8]byte
		binary.BigEndian.PutUint64(hdr[:], uint64(rec.Len()))
		if _, err := w.Write(hdr[:]); err != nil {
			return fail(err)
		}
		if _, err := w.Write(rec.Bytes()); err != nil {
			return fail(err)
		}
		padded += int64(rec.Len())
		unpadded += un
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(ts.path)
		return textSet{}, fmt.Errorf("write payload file %s: %w", ts.path, err)
	}
	ts.meanPadded = float64(padded) / float64(len(els))
	ts.meanUnpad = float64(unpadded) / float64(len(els))
	ts.paddedRatio = float64(padded) / float64(unpadded)
	return ts, nil
}

// readRecords reads a payload file: its records in order.
func readRecords(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("payload file: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var recs [][]byte
	var total int64
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("payload file %s: record %d: %w", path, len(recs), err)
		}
		n := binary.BigEndian.Uint64(hdr[:])
		if n == 0 || n > maxRecordBytes {
			return nil, fmt.Errorf("payload file %s: record %d announces %d bytes, want [1, %d]", path, len(recs), n, maxRecordBytes)
		}
		if total += 8 + int64(n); total > maxPayloadBytes {
			return nil, fmt.Errorf("payload file %s: over %d bytes", path, maxPayloadBytes)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("payload file %s: record %d: %w", path, len(recs), io.ErrUnexpectedEOF)
		}
		recs = append(recs, b)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("payload file %s: no record", path)
	}
	return recs, nil
}

// textBatch is one batch of the text workload as a feedmesh peer holds it.
type textBatch struct {
	el          tensor.Element // padded, as decoded from the record
	paddedBytes int64          // the record's length: what the baselines ship
}

// loadTextBatches reads a payload file and decodes each record's padded
// frame back to its batch.
func loadTextBatches(codec *transport.Codec, path string) ([]textBatch, error) {
	recs, err := readRecords(path)
	if err != nil {
		return nil, err
	}
	out := make([]textBatch, len(recs))
	for i, rec := range recs {
		_, e, err := batch.Decode(codec, bytes.NewReader(rec), batch.DefaultLimits(), nil)
		if err != nil {
			return nil, fmt.Errorf("payload file %s: record %d: %w", path, i, err)
		}
		out[i] = textBatch{el: e, paddedBytes: int64(len(rec))}
	}
	return out, nil
}

// sameShape reports whether got has the tensors of want (names, dtypes,
// shapes, data sizes): the receiver's per-batch check that it got the
// re-padded batch it should have.
func sameShape(got, want tensor.Element) error {
	if len(got.Tensors) != len(want.Tensors) {
		return fmt.Errorf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for i := range want.Tensors {
		g, w := &got.Tensors[i], &want.Tensors[i]
		if g.Name != w.Name || g.DType != w.DType || len(g.Data) != len(w.Data) || !slices.Equal(g.Shape, w.Shape) {
			return fmt.Errorf("tensor %d is %q %s%v (%d bytes), want %q %s%v (%d bytes)",
				i, g.Name, g.DType, g.Shape, len(g.Data), w.Name, w.DType, w.Shape, len(w.Data))
		}
	}
	return nil
}
