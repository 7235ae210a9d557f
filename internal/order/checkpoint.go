package order

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Checkpoint is where one consumer of a deterministic job stands: a
// position, not a set. The consumer is Consumer of Consumers in the cut
// that began at Start (0 at an epoch's start, the resume point after a
// re-cut) and has returned its positions 0..Next-1 of it; the positions
// are global batches of Epoch. Ahead are positions after Start that were
// delivered before the re-cut that made this one (Merge), Skips the
// user's skipped ranges of global batches, every epoch's, recorded so a
// resume skips the same, and Digest what it saw of the epoch. Fingerprint binds it to the job's order (spec,
// seed, layout, batch size): a resume under another refuses.
//
// Its encoding is at most MaxCheckpointLen bytes whatever the dataset's
// size, the epoch or the position.
type Checkpoint struct {
	Fingerprint uint64
	Epoch       uint64
	Consumers   uint64
	Consumer    uint64
	Next        uint64
	Start       uint64
	Skips       []Skip
	Ahead       []Range
	// Anchor numbers the window holding the consumer's next batch (see
	// Batches): a resumed job numbers global batches from there.
	Anchor Anchor
	// Digest is the visitation digest of what the consumer returned of
	// Epoch so far (after a re-cut, the old consumers' digests summed, on
	// consumer 0's checkpoint): a resumed consumer continues it, so the
	// epoch's digests still add up to the epoch's.
	Digest Digest
}

// Skip drops global batches [Lo, Hi) of Epoch.
type Skip struct {
	Epoch uint64
	Range
}

// Checkpoint bounds.
const (
	// MaxSkips bounds a job's skipped ranges.
	MaxSkips = 16
	// MaxAhead bounds the ranges a re-cut may leave delivered ahead of
	// its start (Merge's maxAhead for a checkpoint to hold them).
	MaxAhead = 20
	// MaxCheckpointLen bounds an encoded checkpoint: 3 bytes of header,
	// 8 of fingerprint, 7 varints of at most 10 (the position and the
	// anchor), 2 counts, the ranges at 3 varints (skips) or 2 (ahead)
	// each, and the digest (a varint and 32 bytes).
	MaxCheckpointLen = 3 + 8 + 7*10 + 2 + MaxSkips*30 + MaxAhead*20 + 10 + 32
)

var checkpointMagic = []byte{'F', 'O', 1}

// ErrCheckpoint: bytes that are not a checkpoint this version reads.
var ErrCheckpoint = errors.New("order: bad checkpoint")

// Validate checks a checkpoint's invariants.
func (c Checkpoint) Validate() error {
	switch {
	case c.Consumers == 0 || c.Consumers > MaxConsumers:
		return fmt.Errorf("%w: %d consumers", ErrCheckpoint, c.Consumers)
	case c.Consumer >= c.Consumers:
		return fmt.Errorf("%w: consumer %d of %d", ErrCheckpoint, c.Consumer, c.Consumers)
	case c.Start > MaxPermSize || c.Next > MaxPermSize/c.Consumers:
		return fmt.Errorf("%w: position past 2^62", ErrCheckpoint)
	case c.Anchor.Window >= MaxWindows || c.Anchor.Batch > MaxPermSize:
		return fmt.Errorf("%w: anchor %+v", ErrCheckpoint, c.Anchor)
	case len(c.Skips) > MaxSkips:
		return fmt.Errorf("%w: %d skips (at most %d)", ErrCheckpoint, len(c.Skips), MaxSkips)
	case len(c.Ahead) > MaxAhead:
		return fmt.Errorf("%w: %d ranges ahead (at most %d)", ErrCheckpoint, len(c.Ahead), MaxAhead)
	}
	for i, s := range c.Skips {
		if s.Lo >= s.Hi || s.Hi > MaxPermSize {
			return fmt.Errorf("%w: skip %d: [%d, %d)", ErrCheckpoint, i, s.Lo, s.Hi)
		}
		if i > 0 {
			p := c.Skips[i-1]
			if s.Epoch < p.Epoch || (s.Epoch == p.Epoch && s.Lo <= p.Hi) {
				return fmt.Errorf("%w: skip %d not after skip %d", ErrCheckpoint, i, i-1)
			}
		}
	}
	for i, r := range c.Ahead {
		if r.Lo >= r.Hi || r.Hi > MaxPermSize || r.Lo <= c.Start {
			return fmt.Errorf("%w: ahead %d: [%d, %d) from %d", ErrCheckpoint, i, r.Lo, r.Hi, c.Start)
		}
		if i > 0 && r.Lo <= c.Ahead[i-1].Hi {
			return fmt.Errorf("%w: ahead %d not after ahead %d", ErrCheckpoint, i, i-1)
		}
	}
	return nil
}

// Cut is the checkpoint's cut of its epoch: Start, less the epoch's
// skips and the ranges ahead, among Consumers.
func (c Checkpoint) Cut() Cut {
	var rs []Range
	for _, s := range c.Skips {
		if s.Epoch == c.Epoch {
			rs = append(rs, s.Range)
		}
	}
	rs = append(rs, c.Ahead...)
	return Cut{Start: c.Start, Gaps: NewGaps(rs...), N: c.Consumers}
}

// Position is the global batch the consumer returns next.
func (c Checkpoint) Position() (uint64, error) { return c.Cut().Nth(c.Consumer, c.Next) }

// MarshalBinary encodes a valid checkpoint.
func (c Checkpoint) MarshalBinary() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 64)
	b = append(b, checkpointMagic...)
	b = binary.LittleEndian.AppendUint64(b, c.Fingerprint)
	for _, v := range []uint64{c.Epoch, c.Consumers, c.Consumer, c.Next, c.Start, c.Anchor.Window, c.Anchor.Batch} {
		b = binary.AppendUvarint(b, v)
	}
	b = append(b, byte(len(c.Skips)))
	for _, s := range c.Skips {
		b = binary.AppendUvarint(b, s.Epoch)
		b = binary.AppendUvarint(b, s.Lo)
		b = binary.AppendUvarint(b, s.Hi-s.Lo)
	}
	b = append(b, byte(len(c.Ahead)))
	for _, r := range c.Ahead {
		b = binary.AppendUvarint(b, r.Lo)
		b = binary.AppendUvarint(b, r.Hi-r.Lo)
	}
	b = binary.AppendUvarint(b, c.Digest.Count)
	for _, l := range c.Digest.Sum {
		b = binary.LittleEndian.AppendUint64(b, l)
	}
	return b, nil
}

// UnmarshalBinary decodes a checkpoint: anything but a canonical encoding
// of a valid checkpoint is an error (never a panic).
func (c *Checkpoint) UnmarshalBinary(b []byte) error {
	if len(b) > MaxCheckpointLen {
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrCheckpoint, len(b), MaxCheckpointLen)
	}
	if !bytes.HasPrefix(b, checkpointMagic) || len(b) < len(checkpointMagic)+8 {
		return fmt.Errorf("%w: not a version-1 order checkpoint", ErrCheckpoint)
	}
	r := b[len(checkpointMagic):]
	var d Checkpoint
	d.Fingerprint = binary.LittleEndian.Uint64(r)
	r = r[8:]
	var err error
	uv := func() uint64 {
		if err != nil {
			return 0
		}
		v, n := binary.Uvarint(r)
		if n <= 0 {
			err = fmt.Errorf("%w: truncated or overlong number", ErrCheckpoint)
			return 0
		}
		r = r[n:]
		return v
	}
	count := func(limit int) int {
		if err != nil {
			return 0
		}
		if len(r) == 0 {
			err = fmt.Errorf("%w: truncated", ErrCheckpoint)
			return 0
		}
		n := int(r[0])
		r = r[1:]
		if n > limit {
			err = fmt.Errorf("%w: %d ranges (at most %d)", ErrCheckpoint, n, limit)
			return 0
		}
		return n
	}
	d.Epoch, d.Consumers, d.Consumer, d.Next, d.Start = uv(), uv(), uv(), uv(), uv()
	d.Anchor.Window, d.Anchor.Batch = uv(), uv()
	for range count(MaxSkips) {
		e, lo, n := uv(), uv(), uv()
		if err == nil && lo > MaxPermSize-n {
			err = fmt.Errorf("%w: skip past 2^62", ErrCheckpoint)
		}
		d.Skips = append(d.Skips, Skip{Epoch: e, Range: Range{lo, lo + n}})
	}
	for range count(MaxAhead) {
		lo, n := uv(), uv()
		if err == nil && lo > MaxPermSize-n {
			err = fmt.Errorf("%w: range past 2^62", ErrCheckpoint)
		}
		d.Ahead = append(d.Ahead, Range{lo, lo + n})
	}
	d.Digest.Count = uv()
	if err == nil && len(r) < 32 {
		err = fmt.Errorf("%w: truncated digest", ErrCheckpoint)
	}
	if err == nil {
		for l := range d.Digest.Sum {
			d.Digest.Sum[l] = binary.LittleEndian.Uint64(r[8*l:])
		}
		r = r[32:]
	}
	if err != nil {
		return err
	}
	if len(r) != 0 {
		return fmt.Errorf("%w: %d bytes after the end", ErrCheckpoint, len(r))
	}
	if err := d.Validate(); err != nil {
		return err
	}
	// Canonical: one checkpoint, one encoding (no padded varints).
	if again, _ := d.MarshalBinary(); !bytes.Equal(again, b) {
		return fmt.Errorf("%w: not canonically encoded", ErrCheckpoint)
	}
	*c = d
	return nil
}
