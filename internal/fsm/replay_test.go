package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/splits"
)

// randomJobLog returns n encoded commands over a few datasets, jobs,
// consumers and workers, with increasing proposer times: a mix that
// exercises every job command, its errors included.
func randomJobLog(t testing.TB, r *rand.Rand, n int) [][]byte {
	pick := func(prefix string, k int) string { return fmt.Sprintf("%s%d", prefix, r.IntN(k)) }
	now := int64(1_000_000)
	var log [][]byte
	for range n {
		now += r.Int64N(int64(time.Second))
		job, worker := pick("job", 4), pick("w", 5)
		var c Command
		switch r.IntN(14) {
		case 0:
			fp := pick("fp", 2)
			c = NewRegisterDataset(Dataset{Fingerprint: fp, Spec: []byte("spec of " + fp), NumSplits: 60})
		case 1:
			o := JobOptions{Sharding: []splits.Policy{splits.Off, splits.Dynamic, splits.Dynamic, splits.Dynamic, splits.Static}[r.IntN(5)], Epochs: r.Int64N(3) - 1, NumConsumers: r.IntN(3),
				MaxWorkers: r.IntN(4), ConsumerTTL: 5 * time.Second, GCAfter: time.Minute}
			c = LegacyCreateJob(job, pick("fp", 2), o, []string{pick("w", 5), pick("w", 5)})
		case 2, 3:
			c = NewAttachConsumer(job, pick("c", 4))
		case 4:
			c = NewDetachConsumer(job, pick("c", 4))
		case 5:
			c = NewExpireConsumers(now)
		case 6:
			c = NewAssignTask(job, worker)
		case 7, 8, 12, 13:
			c = NewLeaseSplits(job, worker, uint64(r.IntN(6)), r.IntN(20))
		case 9:
			ids := []int64{r.Int64N(14), r.Int64N(14)}
			c = NewFinishSplits(job, worker, r.Int64N(2), ids)
		case 10:
			c = NewExpireWorker(worker)
		default:
			c = NewGarbageCollectJob(job)
		}
		c.At = now
		log = append(log, mustEncode(t, c))
	}
	return log
}

// applyLog applies entries at indexes from+1.. and returns the results.
func applyLog(s *State, log [][]byte, from int) []string {
	var out []string
	for i, e := range log {
		c, err := DecodeCommand(e)
		if err != nil {
			out = append(out, "decode: "+err.Error())
			continue
		}
		v, err := s.ApplyIndex(uint64(from+i+1), c)
		out = append(out, fmt.Sprintf("%#v %v", v, err))
	}
	return out
}

// TestReplayDeterminism: the same log applied to fresh states gives the same
// results and byte-identical snapshots, also when one replica restarts from
// a snapshot half way.
func TestReplayDeterminism(t *testing.T) {
	leases, lost := 0, 0
	for seed := range uint64(20) {
		log := randomJobLog(t, rand.New(rand.NewPCG(seed, 99)), 600)
		a, b := NewState(), NewState()
		ra, rb := applyLog(a, log, 0), applyLog(b, log, 0)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("seed %d: results differ", seed)
		}
		sa, _ := a.MarshalSnapshot()
		sb, _ := b.MarshalSnapshot()
		if !bytes.Equal(sa, sb) {
			t.Fatalf("seed %d: snapshots differ", seed)
		}
		// A replica restored from a snapshot at the half continues identically.
		c := NewState()
		applyLog(c, log[:300], 0)
		half, err := c.MarshalSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		d, err := UnmarshalSnapshot(half)
		if err != nil {
			t.Fatalf("seed %d: restore: %v", seed, err)
		}
		if rd := applyLog(d, log[300:], 300); !reflect.DeepEqual(rd, ra[300:]) {
			t.Fatalf("seed %d: results after restore differ", seed)
		}
		sd, _ := d.MarshalSnapshot()
		if !bytes.Equal(sa, sd) {
			t.Fatalf("seed %d: snapshot after restore differs", seed)
		}
		for _, r := range ra {
			if strings.Contains(r, "Splits:[]int64{") {
				leases++
			}
			if strings.Contains(r, "map[string][]int64{\"job") {
				lost++
			}
		}
	}
	if leases < 40 || lost < 40 {
		t.Fatalf("the logs exercise too little: %d leases, %d expiries that hit a job", leases, lost)
	}
	t.Logf("%d leases, %d expiries that hit a job", leases, lost)
}
