package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/rounds"
	"github.com/feedmesh/feedmesh/internal/splits"
)

var coordOptions = JobOptions{Sharding: splits.Dynamic, NumConsumers: 2, Coordinated: true}

func schedOf(t *testing.T, s *State, job string) rounds.Schedule {
	t.Helper()
	v, ok := s.Job(job)
	if !ok || v.Rounds == nil {
		t.Fatalf("job %q has no round state", job)
	}
	return v.Rounds.Schedule
}

func TestCoordinatedOptions(t *testing.T) {
	s := newJobState(t, nil)
	for _, o := range []JobOptions{
		{Sharding: splits.Off, NumConsumers: 2, Coordinated: true},
		{Sharding: splits.Dynamic, Coordinated: true},
		{Sharding: splits.Dynamic, NumConsumers: rounds.MaxConsumers + 1, Coordinated: true},
		{Sharding: splits.Dynamic, NumConsumers: 2, Coordinated: true, Share: true},
		{Sharding: splits.Dynamic, PadFinalRound: true},
	} {
		applyErr(t, s, LegacyCreateJob("c", "fp1", o, nil), ErrInvalidCommand)
	}
	applyOK(t, s, LegacyCreateJob("c", "fp1", coordOptions, nil))
	applyErr(t, s, LegacyCreateJob("c", "fp1", JobOptions{Sharding: splits.Dynamic, NumConsumers: 2, Coordinated: true, PadFinalRound: true}, nil), ErrMismatch)
	applyOK(t, s, LegacyCreateJob("plain", "fp1", JobOptions{Sharding: splits.Dynamic}, nil))
	applyErr(t, s, NewReportRound("plain", 0, 0), ErrInvalidCommand)
	applyErr(t, s, NewReportRound("nope", 0, 0), ErrUnknownJob)
	applyErr(t, s, NewReportRound("c", 2, 0), ErrInvalidCommand)
	applyErr(t, s, NewReportRound("c", -1, 0), ErrInvalidCommand)
	applyErr(t, s, NewReportRound("c", 0, -1), ErrInvalidCommand)
	applyErr(t, s, NewReportRound("c", 0, maxRound+1), ErrInvalidCommand)
}

// TestRotationChanges is the table of how AssignTask, ExpireWorker and
// ReportRound move the rotation.
func TestRotationChanges(t *testing.T) {
	s := newJobState(t, &coordOptions)
	// Before any report: workers join and leave the rotation from round 0.
	applyOK(t, s, NewAssignTask("j1", "w1"))
	applyOK(t, s, NewAssignTask("j1", "w2"))
	applyOK(t, s, NewAssignTask("j1", "w3"))
	applyOK(t, s, NewExpireWorker("w2"))
	want := []rounds.Change{{From: 0, Workers: []string{"w1", "w3"}}}
	if got := schedOf(t, s, "j1").Changes; !reflect.DeepEqual(got, want) {
		t.Fatalf("before start: %+v", got)
	}
	// The first report starts the rounds; reports keep the maximum.
	if got := applyOK(t, s, NewReportRound("j1", 0, 10)); got != int64(10) {
		t.Fatalf("report: %v", got)
	}
	if got := applyOK(t, s, NewReportRound("j1", 0, 7)); got != int64(10) {
		t.Fatalf("lower report: %v", got)
	}
	// An expired worker never comes back into the rotation (its consumers
	// skip its rounds for good); AssignTask v1, from an older log, put it
	// back like a joining worker.
	applyErr(t, s, NewAssignTask("j1", "w2"), ErrNotAssigned)
	// After: a joining worker from max(reached) + RoundLookahead.
	applyOK(t, s, assignV1("j1", "w2"))
	want = append(want, rounds.Change{From: 10 + RoundLookahead, Workers: []string{"w1", "w3", "w2"}})
	if got := schedOf(t, s, "j1").Changes; !reflect.DeepEqual(got, want) {
		t.Fatalf("join after start: %+v", got)
	}
	// A dead worker is evicted from the same bound, pending changes too.
	applyOK(t, s, NewReportRound("j1", 1, 20))
	applyOK(t, s, NewExpireWorker("w3"))
	sc := schedOf(t, s, "j1")
	from := int64(20 + RoundLookahead)
	for r := from; r < from+12; r++ {
		if w, _ := sc.WorkerFor(r); w == "w3" {
			t.Fatalf("round %d still served by the dead w3: %+v", r, sc.Changes)
		}
	}
	if w, _ := sc.WorkerFor(from - 1); w != "w3" && w != "w1" && w != "w2" {
		t.Fatalf("round %d: %q", from-1, w)
	}
	// The only worker stays (its rounds are skipped while it is dead).
	applyOK(t, s, NewExpireWorker("w1"))
	applyOK(t, s, NewExpireWorker("w2"))
	if cur := schedOf(t, s, "j1").Current(); len(cur) != 1 {
		t.Fatalf("rotation emptied: %v", cur)
	}
	// Every index past a change compacts it away.
	applyOK(t, s, NewReportRound("j1", 0, 1000))
	applyOK(t, s, NewReportRound("j1", 1, 1000))
	if got := schedOf(t, s, "j1").Changes; len(got) != 1 || got[0].From != 0 {
		t.Fatalf("not compacted: %+v", got)
	}
}

// coordLog is a random log of coordinated-job commands.
func coordLog(t testing.TB, r *rand.Rand, n int) [][]byte {
	log := [][]byte{mustEncode(t, NewRegisterDataset(testDataset))}
	now := int64(1_000_000)
	for range n {
		now += r.Int64N(int64(time.Second))
		job, worker := fmt.Sprintf("c%d", r.IntN(2)), fmt.Sprintf("w%d", r.IntN(4))
		var c Command
		switch r.IntN(8) {
		case 0:
			c = LegacyCreateJob(job, "fp1", JobOptions{Sharding: splits.Dynamic, NumConsumers: 3, Coordinated: true, PadFinalRound: r.IntN(2) == 0}, nil)
		case 1, 2:
			c = NewAssignTask(job, worker)
			if r.IntN(2) == 0 {
				c = assignV1(job, worker) // an older log's: revives the expired
			}
		case 3:
			c = NewExpireWorker(worker)
		case 4, 5, 6:
			c = NewReportRound(job, r.IntN(4), r.Int64N(500))
		default:
			c = NewGarbageCollectJob(job)
		}
		c.At = now
		log = append(log, mustEncode(t, c))
	}
	return log
}

// TestRoundsReplayAndSnapshot: the round commands replay identically,
// round-trip through snapshots, and every schedule stays valid with each
// round served by exactly one worker.
func TestRoundsReplayAndSnapshot(t *testing.T) {
	for seed := range uint64(20) {
		log := coordLog(t, rand.New(rand.NewPCG(seed, 7)), 400)
		a, b := NewState(), NewState()
		ra, rb := applyLog(a, log, 0), applyLog(b, log, 0)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("seed %d: results differ", seed)
		}
		sa, _ := a.MarshalSnapshot()
		c := NewState()
		applyLog(c, log[:200], 0)
		half, err := c.MarshalSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		d, err := UnmarshalSnapshot(half)
		if err != nil {
			t.Fatalf("seed %d: restore: %v", seed, err)
		}
		if rd := applyLog(d, log[200:], 200); !reflect.DeepEqual(rd, ra[200:]) {
			t.Fatalf("seed %d: results after restore differ", seed)
		}
		sd, _ := d.MarshalSnapshot()
		if !bytes.Equal(sa, sd) {
			t.Fatalf("seed %d: snapshot after restore differs", seed)
		}
		for _, v := range a.JobList() {
			if v.Rounds == nil || len(v.Rounds.Schedule.Changes) == 0 {
				continue
			}
			if err := v.Rounds.Schedule.Validate(); err != nil {
				t.Fatalf("seed %d: job %s: %v", seed, v.Name, err)
			}
			for r := int64(0); r < 700; r++ {
				w, err := v.Rounds.Schedule.WorkerFor(r)
				if err != nil || !slices.Contains(slices.Collect(func(yield func(string) bool) {
					for name := range v.Workers {
						if !yield(name) {
							return
						}
					}
				}), w) {
					t.Fatalf("seed %d: round %d served by %q (%v), not a worker of the job", seed, r, w, err)
				}
			}
		}
	}
}
