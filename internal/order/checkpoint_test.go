package order

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

func randomCheckpoint(r *rand.Rand) Checkpoint {
	n := 1 + r.Uint64N(1024)
	c := Checkpoint{
		Fingerprint: r.Uint64(),
		Epoch:       r.Uint64N(100),
		Consumers:   n,
		Consumer:    r.Uint64N(n),
		Next:        r.Uint64N(1 << 30),
		Start:       r.Uint64N(1 << 40),
	}
	if r.IntN(2) == 0 {
		c.Anchor = Anchor{Window: r.Uint64N(MaxWindows), Batch: r.Uint64N(1 << 40)}
	}
	if r.IntN(2) == 0 {
		c.Digest = Digest{Count: r.Uint64N(1 << 40), Sum: [4]uint64{r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()}}
	}
	var e, lo uint64
	for range r.IntN(MaxSkips + 1) {
		if r.IntN(3) == 0 {
			e++
			lo = 0
		}
		lo += 1 + r.Uint64N(1000)
		hi := lo + 1 + r.Uint64N(1000)
		c.Skips = append(c.Skips, Skip{Epoch: e, Range: Range{lo, hi}})
		lo = hi
	}
	lo = c.Start
	for range r.IntN(MaxAhead + 1) {
		lo += 1 + r.Uint64N(50)
		hi := lo + 1 + r.Uint64N(50)
		c.Ahead = append(c.Ahead, Range{lo, hi})
		lo = hi
	}
	return c
}

func TestCheckpointRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for range 2000 {
		c := randomCheckpoint(r)
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if len(b) > MaxCheckpointLen {
			t.Fatalf("%d bytes", len(b))
		}
		var d Checkpoint
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !reflect.DeepEqual(c, d) {
			t.Fatalf("round trip: %+v, got %+v", c, d)
		}
	}
}

// TestCheckpointUnder1KB: the largest checkpoint there can be, every
// number at its bound and every range list full, is under 1 KB; a
// typical one (one consumer of 64, no skips) is tens of bytes.
func TestCheckpointUnder1KB(t *testing.T) {
	if MaxCheckpointLen >= 1024 {
		t.Fatalf("MaxCheckpointLen %d", MaxCheckpointLen)
	}
	big := uint64(MaxPermSize)
	c := Checkpoint{Fingerprint: ^uint64(0), Epoch: ^uint64(0), Consumers: MaxConsumers, Consumer: MaxConsumers - 1, Next: big / MaxConsumers, Start: 1 << 61,
		Digest: Digest{Count: ^uint64(0), Sum: [4]uint64{1, 2, 3, 4}}, Anchor: Anchor{Window: MaxWindows - 1, Batch: MaxPermSize}}
	for i := range uint64(MaxSkips) {
		c.Skips = append(c.Skips, Skip{Epoch: ^uint64(0) - MaxSkips + i, Range: Range{1 << 60, 1<<61 + 1}})
	}
	for i := range uint64(MaxAhead) {
		lo := c.Start + 1 + i*(1<<50)
		c.Ahead = append(c.Ahead, Range{lo, lo + 1<<49})
	}
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("largest checkpoint: %d bytes (bound %d)", len(b), MaxCheckpointLen)
	if len(b) >= 1024 || len(b) > MaxCheckpointLen {
		t.Fatalf("largest checkpoint is %d bytes", len(b))
	}
	typical, _ := Checkpoint{Fingerprint: 1, Epoch: 3, Consumers: 64, Consumer: 17, Next: 41_000}.MarshalBinary()
	t.Logf("typical checkpoint: %d bytes", len(typical))
	if len(typical) > 64 {
		t.Fatalf("typical checkpoint is %d bytes", len(typical))
	}
}

// TestCheckpointResume: a merged cut written to the consumers'
// checkpoints (Start, Ahead, the skips) gives back the same positions.
func TestCheckpointResume(t *testing.T) {
	skips := []Skip{{Epoch: 2, Range: Range{30, 40}}, {Epoch: 3, Range: Range{5, 6}}}
	old := Checkpoint{Epoch: 2, Consumers: 4, Skips: skips}.Cut()
	ps := []ConsumerProgress{{0, 11}, {1, 11}, {2, 10}, {3, 10}}
	next, err := Merge(old, ps, 3, MaxAhead)
	if err != nil {
		t.Fatal(err)
	}
	var ahead []Range
	for _, r := range next.Gaps.Ranges() {
		if !(r.Lo >= 30 && r.Hi <= 40) {
			ahead = append(ahead, r)
		}
	}
	for i := range uint64(3) {
		ck := Checkpoint{Epoch: 2, Consumers: 3, Consumer: i, Next: 5, Start: next.Start, Skips: skips, Ahead: ahead}
		b, err := ck.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back Checkpoint
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		got, err := back.Position()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := next.Nth(i, 5)
		if got != want {
			t.Fatalf("consumer %d: checkpoint position %d, merged cut %d", i, got, want)
		}
	}
}

func TestCheckpointRejects(t *testing.T) {
	good, _ := Checkpoint{Consumers: 2, Consumer: 1, Next: 300, Skips: []Skip{{0, Range{1, 2}}}}.MarshalBinary()
	bad := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte{'X'}, good[1:]...),
		"version":   append([]byte{'F', 'O', 2}, good[3:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
		"padded":    append(append(append([]byte{}, good[:11]...), 0x80, 0x00), good[12:]...),
	}
	for name, b := range bad {
		var c Checkpoint
		if err := c.UnmarshalBinary(b); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: %v, want ErrCheckpoint", name, err)
		}
	}
	for name, c := range map[string]Checkpoint{
		"no consumers":   {},
		"consumer":       {Consumers: 2, Consumer: 2},
		"skip empty":     {Consumers: 1, Skips: []Skip{{0, Range{3, 3}}}},
		"skip unsorted":  {Consumers: 1, Skips: []Skip{{0, Range{5, 9}}, {0, Range{1, 2}}}},
		"ahead at start": {Consumers: 1, Start: 5, Ahead: []Range{{5, 6}}},
		"ahead touching": {Consumers: 1, Ahead: []Range{{1, 3}, {3, 4}}},
	} {
		if _, err := c.MarshalBinary(); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: %v, want ErrCheckpoint", name, err)
		}
	}
}

// FuzzCheckpoint: no input panics the decoder; what decodes is valid and
// re-encodes to the same bytes.
func FuzzCheckpoint(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 8 {
		b, _ := randomCheckpoint(r).MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte{'F', 'O', 1})
	f.Add([]byte{'F', 'O', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Checkpoint
		if err := c.UnmarshalBinary(b); err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("decoded an invalid checkpoint: %v", err)
		}
		again, err := c.MarshalBinary()
		if err != nil || string(again) != string(b) {
			t.Fatalf("re-encoding differs: %x vs %x (%v)", again, b, err)
		}
		if _, err := c.Position(); err != nil {
			t.Fatalf("a valid checkpoint has no position: %v", err)
		}
	})
}
