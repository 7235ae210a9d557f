package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/testcluster"
)

// readUntil reads it until after batches batches, takes a checkpoint and
// closes it, returning what it read and the checkpoint.
func readUntil(t *testing.T, it *client.Iterator, batches int) (delivery, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := delivery{counts: map[int64]int{}, byWorker: map[string][]int64{}}
	for d.batches < batches {
		b, err := it.Next(ctx)
		if err != nil {
			t.Fatalf("after %d batches: %v", d.batches, err)
		}
		d.batches++
		for _, v := range values(t, b) {
			d.counts[v]++
		}
	}
	t.Logf("before checkpoint: %+v", it.Stats().Exact)
	ck, err := it.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return d, ck
}

func merge(ds ...delivery) delivery {
	m := delivery{counts: map[int64]int{}}
	for _, d := range ds {
		m.batches += d.batches
		for v, k := range d.counts {
			m.counts[v] += k
		}
	}
	return m
}

// TestResumeFromCheckpoint: a consumer checkpoints after k batches and
// closes; a fresh client resumes the job from the checkpoint: what the
// two read is the dataset exactly once per epoch, for 1 epoch and for 3
// with the checkpoint taken in the second.
func TestResumeFromCheckpoint(t *testing.T) {
	c := testcluster.Start(t, 3)
	for _, tc := range []struct {
		name   string
		epochs int64
		k      int
	}{{"one-epoch", 1, 60}, {"three-epochs", 3, 450}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3000
			opts := client.JobOptions{Name: "resume-" + tc.name, Sharding: client.Dynamic, Epochs: tc.epochs}
			it, err := dial(t, c, 0).Distribute(context.Background(), shuffledSpec(n, 20, 10, 100), opts)
			if err != nil {
				t.Fatal(err)
			}
			before, ck := readUntil(t, it, tc.k)
			t.Logf("checkpoint after %d batches: %d bytes", tc.k, len(ck))
			opts.Resume = ck
			it2, err := dial(t, c, 1).Distribute(context.Background(), shuffledSpec(n, 20, 10, 100), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer it2.Close()
			after := drain(t, it2, 120*time.Second, nil)
			checkExactly(t, merge(before, after), n, int(tc.epochs))
			st := it2.Stats()
			t.Logf("resumed: %d batches; exactly-once counters %+v", after.batches, st.Exact)
		})
	}
}

// TestResumeBadCheckpoint: a checkpoint of another job, dataset or epoch
// count, truncated, corrupted or of a newer format is refused with an
// error that says so, and nothing is created.
func TestResumeBadCheckpoint(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := dial(t, c, 0)
	opts := client.JobOptions{Name: "bad-ck", Sharding: client.Dynamic}
	it, err := cl.Distribute(context.Background(), shuffledSpec(500, 20, 10, 1), opts)
	if err != nil {
		t.Fatal(err)
	}
	_, ck := readUntil(t, it, 5)
	flip := append([]byte(nil), ck...)
	flip[len(flip)/2] ^= 0x40
	newer := append([]byte(nil), ck...)
	newer[5] = 9
	for _, tc := range []struct {
		name string
		ck   []byte
		o    func(client.JobOptions) client.JobOptions
		want string
	}{
		{"other-job", ck, func(o client.JobOptions) client.JobOptions { o.Name = "other"; return o }, `job "bad-ck", not "other"`},
		{"other-epochs", ck, func(o client.JobOptions) client.JobOptions { o.Epochs = 2; return o }, "1 epochs, not 2"},
		{"truncated", ck[:len(ck)-7], nil, "corrupted or truncated"},
		{"corrupted", flip, nil, "corrupted"},
		{"newer", newer, nil, "newer feedmesh"},
		{"not-one", []byte("hello"), nil, "not a feedmesh checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			if tc.o != nil {
				o = tc.o(o)
			}
			o.Resume = tc.ck
			_, err := cl.Distribute(context.Background(), shuffledSpec(500, 20, 10, 1), o)
			if !errors.Is(err, client.ErrBadCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrBadCheckpoint saying %q", err, tc.want)
			}
		})
	}
	o := opts
	o.Resume = ck
	if _, err := cl.Distribute(context.Background(), shuffledSpec(501, 20, 10, 1), o); !errors.Is(err, client.ErrBadCheckpoint) || !strings.Contains(err.Error(), "another dataset") {
		t.Fatalf("another dataset: %v", err)
	}
}
