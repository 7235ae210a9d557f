package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxPayloadBytes bounds a --payload-file: both peers hold all of it.
const maxPayloadBytes = 1 << 30

// batches is what a peer sends or expects: batch i is records[i%len], of
// sizes[i%len] bytes.
type batches struct {
	records [][]byte // nil for a receiver of the default workload
	sizes   []int
	max     int // the largest size
}

// fixedBatches is the default workload: one random payload of size bytes
// (its bytes are made only for a sender).
func fixedBatches(size int, sender bool) batches {
	b := batches{sizes: []int{size}, max: size}
	if sender {
		b.records = [][]byte{payload(size)}
	}
	return b
}

// at returns batch i (a sender's).
func (b batches) at(i int64) []byte { return b.records[i%int64(len(b.records))] }

// size returns the length of batch i.
func (b batches) size(i int64) int { return b.sizes[i%int64(len(b.sizes))] }

// readPayloadFile reads a --payload-file: a sequence of records, each an
// 8-byte big-endian length in [1, maxSize] followed by that many bytes (the
// text workload of `feedmesh-bench transport` writes one padded batch per
// record). At least one record; at most maxPayloadBytes in all.
func readPayloadFile(path string) (batches, error) {
	f, err := os.Open(path)
	if err != nil {
		return batches{}, err
	}
	defer f.Close()
	b, err := parsePayload(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return batches{}, fmt.Errorf("--payload-file %s: %w", path, err)
	}
	return b, nil
}

// parsePayload parses the records of a payload file.
func parsePayload(r io.Reader) (batches, error) {
	var b batches
	var total int64
	for {
		var hdr [frameHeader]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return batches{}, fmt.Errorf("record %d: truncated length", len(b.records))
		}
		n := binary.BigEndian.Uint64(hdr[:])
		if n == 0 || n > maxSize {
			return batches{}, fmt.Errorf("record %d announces %d bytes, want [1, %d]", len(b.records), n, maxSize)
		}
		if total += frameHeader + int64(n); total > maxPayloadBytes {
			return batches{}, fmt.Errorf("more than %d bytes", maxPayloadBytes)
		}
		rec := make([]byte, n)
		if _, err := io.ReadFull(r, rec); err != nil {
			return batches{}, fmt.Errorf("record %d: %d bytes announced, file ends first", len(b.records), n)
		}
		b.records = append(b.records, rec)
		b.sizes = append(b.sizes, int(n))
		b.max = max(b.max, int(n))
	}
	if len(b.records) == 0 {
		return batches{}, errors.New("no record")
	}
	return b, nil
}
