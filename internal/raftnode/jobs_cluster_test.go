package raftnode

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/hashicorp/raft"
)

// applyAnyLeader applies c on whichever of nodes leads, retrying the same
// command (ids and all) while leadership moves, as a mesh node does.
func applyAnyLeader(t *testing.T, ctx context.Context, nodes []*testNode, c fsm.Command) Result {
	t.Helper()
	for {
		for _, n := range nodes {
			if !n.IsLeader() {
				continue
			}
			res, err := n.Apply(ctx, c)
			if err == nil {
				return res
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, ErrClosed) {
				t.Fatalf("apply %v on %s: %v", c.Type, n.id, err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("apply %v: no leader took it: %v", c.Type, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestClusterLeaseAcrossLeaderFailover: splits are leased through the
// leader, the leader is killed, leasing continues on the new leader (a
// retried request gets its original answer there), and no split is handed
// out twice.
func TestClusterLeaseAcrossLeaderFailover(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const numSplits = 200
	for _, c := range []fsm.Command{
		fsm.NewRegisterDataset(fsm.Dataset{Fingerprint: "fp", Spec: []byte("spec"), NumSplits: numSplits}),
		fsm.LegacyCreateJob("j", "fp", fsm.JobOptions{Sharding: splits.Dynamic}, nil),
		fsm.NewAssignTask("j", "w1"),
		fsm.NewAssignTask("j", "w2"),
	} {
		if _, err := leader.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	handed := map[int64]string{}
	reqs := map[string]uint64{}
	take := func(nodes []*testNode, worker string) splits.Lease {
		reqs[worker]++
		res := applyAnyLeader(t, ctx, nodes, fsm.NewLeaseSplits("j", worker, reqs[worker], 16))
		l, ok := res.Value.(splits.Lease)
		if !ok {
			t.Fatalf("LeaseSplits result %T", res.Value)
		}
		for _, s := range l.Splits {
			if prev, dup := handed[s]; dup {
				t.Fatalf("split %d handed to %s and %s", s, prev, worker)
			}
			handed[s] = worker
		}
		applyAnyLeader(t, ctx, nodes, fsm.NewFinishSplits("j", worker, l.Epoch, l.Splits))
		return l
	}
	var last splits.Lease
	for i := range 6 {
		last = take(nodes, []string{"w1", "w2"}[i%2])
	}

	_ = leader.Close()
	rest := slices.DeleteFunc(slices.Clone(nodes), func(n *testNode) bool { return n == leader })
	waitLeader(t, rest)

	// w2's last request, retried on the new leader (its response "lost"):
	// the same splits, nothing new handed out.
	retry := applyAnyLeader(t, ctx, rest, fsm.NewLeaseSplits("j", "w2", reqs["w2"], 16)).Value.(splits.Lease)
	if !slices.Equal(retry.Splits, last.Splits) || retry.Epoch != last.Epoch {
		t.Fatalf("retry on the new leader: %+v, first answer %+v", retry, last)
	}
	for i := 0; ; i++ {
		if l := take(rest, []string{"w1", "w2"}[i%2]); l.Done {
			break
		}
		if i > numSplits {
			t.Fatal("leasing never finishes")
		}
	}
	if len(handed) != numSplits {
		t.Fatalf("%d splits handed out, want %d", len(handed), numSplits)
	}
	for _, n := range rest {
		testutil.WaitFor(t, 5*time.Second, "job complete on "+n.id, func() bool {
			v, ok := n.Job("j")
			return ok && v.Progress != nil && v.Progress.Complete && v.Progress.Total.Finished == numSplits
		})
	}
	if js := rest[0].Jobs(); len(js) != 1 || js[0].Name != "j" {
		t.Fatalf("Jobs() = %+v", js)
	}
	if d, ok := rest[1].Dataset("fp"); !ok || d.NumSplits != numSplits {
		t.Fatalf("Dataset = %+v, %v", d, ok)
	}
	// A rejected job command comes back as ErrRejected wrapping the cause.
	_, err := waitLeader(t, rest).Apply(ctx, fsm.NewAttachConsumer("nope", "c"))
	if !errors.Is(err, ErrRejected) || !errors.Is(err, fsm.ErrUnknownJob) {
		t.Fatalf("attach to unknown job: %v", err)
	}
}
