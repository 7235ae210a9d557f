package compose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/pairwise"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

func init() {
	// Tokens of a length that varies with the element's id, for the
	// coordinated rows' bucket_by_sequence_length; the id stays in
	// "value".
	fn.RegisterMap("test_compose_tokens", func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		v, ok := e.Get("value")
		if !ok {
			return e, errors.New("no value")
		}
		ids, err := v.Int64s()
		if err != nil || len(ids) != 1 {
			return e, fmt.Errorf("value: %v", err)
		}
		n := ids[0]%24 + 1
		tok, err := tensor.FromInt64s("tokens", []int64{n}, make([]int64, n))
		if err != nil {
			return e, err
		}
		e.Set(tok)
		return e, nil
	})
	// A filter that keeps every element: a take after it counts per
	// worker pipeline (pipeline.FoldTakeSkip cannot apply it).
	fn.RegisterFilter("test_compose_keep", func(*fn.FnContext, tensor.Element) (bool, error) { return true, nil })
}

// sizes is the number of each dimension's values (jobspec.ComboValues).
func sizes() []int {
	s := make([]int, len(jobspec.Dims))
	for i, d := range jobspec.Dims {
		s[i] = len(jobspec.ComboValues[d])
	}
	return s
}

// works is the covering array's constraint: the combinations that
// Distribute accepts, with the spec's order any (deterministic order's
// combinations run in systemtest/order: its specs take fewer ops).
func works(row []int) bool {
	c := jobspec.ComboAt(row)
	return c.Order == "" && c.Check() == nil
}

// coveringArray is the rows the system test runs: every pair of values of
// every two dimensions that some accepted combination has.
func coveringArray(t testing.TB) [][]int {
	rows, err := pairwise.Generate(sizes(), works)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestCoveringArray: the rows cover every pair of values that composes,
// and every row composes (pure: no cluster).
func TestCoveringArray(t *testing.T) {
	rows := coveringArray(t)
	if u := pairwise.Uncovered(sizes(), works, rows); len(u) > 0 {
		t.Fatalf("pairs not covered: %v", u)
	}
	for _, r := range rows {
		if err := jobspec.ComboAt(r).Check(); err != nil {
			t.Fatalf("row %v: %v", r, err)
		}
	}
	t.Logf("%d rows cover every pair of the %d accepted combinations", len(rows), countAccepted())
}

func countAccepted() int {
	n := 0
	idx := make([]int, len(jobspec.Dims))
	var rec func(i int)
	rec = func(i int) {
		if i == len(idx) {
			if works(idx) {
				n++
			}
			return
		}
		for v := range sizes()[i] {
			idx[i] = v
			rec(i + 1)
		}
	}
	rec(0)
	return n
}

// TestComposeUnderKill runs every row of the covering array (29, about
// 32 s on 2 loaded cores: all of them, in the normal suite) on one 3-node
// in-process cluster: each row's job reads a dataset of element ids,
// a worker node is killed in the middle of it (and restarted after it),
// and what arrived is checked element by element against the row's
// guarantee (jobspec.Guarantee): exactly once per epoch, at most once
// (and the loss counted exactly where stated), or a copy per worker.
// A row that resumes reads part of the job, checkpoints, and resumes,
// the kill in the resumed part.
func TestComposeUnderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster and a kill per row")
	}
	rows := coveringArray(t)
	c := testcluster.Start(t, 3)
	cl := dial(t, c, 0)
	start := time.Now()
	for i := range rows {
		combo := jobspec.ComboAt(rows[i])
		t.Run(fmt.Sprintf("row%02d", i), func(t *testing.T) {
			t.Logf("row %d: %v; guarantee: %s", i, combo, combo.Guarantee())
			runRow(t, c, cl, i, combo)
		})
		if t.Failed() {
			break
		}
	}
	t.Logf("%d rows in %v", len(rows), time.Since(start).Round(time.Millisecond))
}

func dial(t *testing.T, c *testcluster.Cluster, i int) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(i).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond,
		OffloadProfiles: "off", LossWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// The rows' dataset: elements 0..n-1 (n differs per row, so that no two
// rows share a dataset: sharing jobs of one dataset share production),
// in splits of splitSize, each spending costUs.
const (
	baseN     = 600
	splitSize = 10
	costUs    = 800
	takeN     = 120 // a DYNAMIC job's: of the epoch's order
	skipN     = 30
	// perWorkerTake is a take after a filter: the nodes cannot apply it
	// to the epoch's order, so each worker pipeline counts its own.
	perWorkerTake = 80
	killAfter     = 4 // batches before the kill
	resumeAt      = 3 // batches the first part of a resumed row reads
)

// specOf is the row's pipeline.
func specOf(combo jobspec.Combo, n int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: splitSize}})
	s.Cost(0, costUs)
	if combo.Autocache {
		s.Autocache()
	}
	switch combo.TakeSkip {
	case jobspec.ValTake:
		s.Take(takeN)
	case jobspec.ValSkip:
		s.Skip(skipN)
	case jobspec.ValPerWorker:
		s.Filter("test_compose_keep", nil).Take(perWorkerTake)
	}
	if combo.Coordinated {
		s.Map("test_compose_tokens", nil, 1)
		s.BucketBySequenceLength(pipeline.BucketOp{Tensor: "tokens", Boundaries: []int64{8, 16}, BatchSizes: []int64{8, 4, 2}})
	} else {
		s.Batch(8, false)
	}
	return s
}

// got is what one consumer received: per worker, each element's count.
type got struct {
	byWorker map[string]map[int64]int
	batches  int
}

func newGot() got { return got{byWorker: map[string]map[int64]int{}} }

func (g got) total() map[int64]int {
	m := map[int64]int{}
	for _, ws := range g.byWorker {
		for v, k := range ws {
			m[v] += k
		}
	}
	return m
}

// read takes batches from it until its end (max < 0) or max batches,
// calling each after every batch.
func read(t *testing.T, it *client.Iterator, g *got, max int, each func(client.Batch)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for max < 0 || g.batches < max {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			if max >= 0 {
				t.Fatalf("the job ended after %d batches, before %d", g.batches, max)
			}
			return
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", g.batches, err)
		}
		g.batches++
		if tv, ok := b.Get("value"); ok {
			vs, err := tv.Int64s()
			if err != nil {
				t.Fatal(err)
			}
			if g.byWorker[b.Worker] == nil {
				g.byWorker[b.Worker] = map[int64]int{}
			}
			for _, v := range vs {
				g.byWorker[b.Worker][v]++
			}
		} else if b.Rows() != 0 {
			t.Fatalf("a batch of %d rows without its ids", b.Rows())
		}
		if each != nil {
			each(b)
		}
	}
}

// runRow runs one row: its job (resumed, if the row says so), a worker
// killed after killAfter batches and restarted at the end, and the check
// of its guarantee.
func runRow(t *testing.T, c *testcluster.Cluster, cl *client.Client, row int, combo jobspec.Combo) {
	runRowKilling(t, c, cl, row, combo, func(t *testing.T, _ string, g got) int { return pickVictim(t, c, g) })
}

// runRowKilling is runRow with the victim chosen by victim (given the
// job's name and what arrived so far).
func runRowKilling(t *testing.T, c *testcluster.Cluster, cl *client.Client, row int, combo jobspec.Combo, victim func(t *testing.T, job string, g got) int) {
	n := int64(baseN + row)
	spec := specOf(combo, n)
	name := fmt.Sprintf("compose-%02d", row)
	opts := combo.Options(name)
	opts.Resume = nil
	opts.LocalCPUs = 1
	epochs := int(max(combo.Epochs, 1))
	ctx := context.Background()
	before := newGot()
	if combo.Resume {
		it, err := cl.Distribute(ctx, spec, opts)
		if err != nil {
			t.Fatalf("distribute: %v", err)
		}
		read(t, it, &before, resumeAt, nil)
		ck, err := it.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		opts.Resume = ck
	}
	it, err := cl.Distribute(ctx, spec, opts)
	if err != nil {
		t.Fatalf("distribute: %v", err)
	}
	defer it.Close()
	defer jobtest.DumpJobOnFailure(t, c, name, it)
	defer func() {
		if !t.Failed() {
			return
		}
		for _, j := range c.Running() {
			t.Logf("%s's members at failure: %+v", c.Name(j), c.Node(j).Members())
		}
		if ji, ok := jobtest.JobInfo(t, cl, name); ok {
			t.Logf("job %s at failure: state %s, workers %+v", name, ji.State, ji.Workers)
		}
	}()
	after := newGot()
	killed := -1
	read(t, it, &after, -1, func(b client.Batch) {
		if killed < 0 && after.batches >= killAfter {
			killed = victim(t, name, after)
			t.Logf("killing %s after %d batches (workers so far %v)", c.Name(killed), after.batches, jobtest.Keys(after.byWorker))
			c.Kill(killed)
		}
	})
	if killed < 0 {
		t.Fatalf("the job ended after %d batches, before the kill", after.batches)
	}
	st := it.Stats()
	t.Logf("%d+%d batches; offload %+v; workers %v; splits lost %d, elements lost %d (counted %v); requeued %v",
		before.batches, after.batches, offloadMode(st), jobtest.Keys(after.byWorker), st.SplitsLost, st.ElementsLost, st.LossCounted, exactRequeued(st))
	check(t, combo, n, epochs, before, after, c.Name(killed), st)
	if err := it.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	// Bring the victim back for the next row.
	if err := c.Restart(killed); err != nil {
		t.Fatal(err)
	}
	// The next row starts once the victim is back as a voter, and knows
	// the cluster's protocol level (a node just restarted counts the
	// servers gossip has not told it about yet at the legacy level, and
	// a client asking it then would be refused what needs this one).
	c.WaitFor(t, 30*time.Second, "the victim back, alive and a voter, at this release's level, and a leader", func() bool {
		_, l := c.Leader()
		if l == nil || c.Node(killed).Status().Protocol != fsm.Protocol {
			return false
		}
		voters := 0
		for _, m := range l.Members() {
			if m.Status == api.StatusAlive && (m.Raft == "voter" || m.Raft == "leader") {
				voters++
			}
		}
		return voters == 3
	})
}

func offloadMode(st client.Stats) string {
	if st.Offload == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", st.Offload.Mode, st.Offload.Reason)
}

func exactRequeued(st client.Stats) string {
	if st.Exact == nil {
		return "-"
	}
	return strconv.FormatInt(st.Exact.Requeued, 10)
}

// pickVictim is the node to kill: a node that served the job so far,
// not the one the client dialed (0) and not the leader, if there is one;
// else any node but those two (the job's workers are the dialed node or
// the leader, or a local worker).
func pickVictim(t *testing.T, c *testcluster.Cluster, g got) int {
	l, _ := c.WaitLeader(t, 10*time.Second)
	var cand []int
	for w := range g.byWorker {
		if i := c.Index(w); i > 0 && i != l {
			cand = append(cand, i)
		}
	}
	slices.Sort(cand)
	if len(cand) > 0 {
		return cand[0]
	}
	for _, i := range []int{1, 2} {
		if i != l {
			return i
		}
	}
	return 1
}

// check verifies the row's guarantee element by element over both parts
// of the read (a resumed row's first part and the rest).
func check(t *testing.T, combo jobspec.Combo, n int64, epochs int, before, after got, victim string, st client.Stats) {
	t.Helper()
	g := combo.Guarantee()
	// The elements the epoch delivers: the dataset, or the window of
	// its order that a DYNAMIC job's take or skip selects.
	lo, hi := int64(0), n
	if g.Window {
		switch combo.TakeSkip {
		case jobspec.ValTake:
			hi = takeN
		case jobspec.ValSkip:
			lo = skipN
		}
	}
	all := before.total()
	for v, k := range after.total() {
		all[v] += k
	}
	for v := range all {
		if v < lo || v >= hi {
			t.Fatalf("element %d is not in [%d, %d), what the epoch delivers", v, lo, hi)
		}
	}
	switch {
	case g.Copies == 0:
		// A copy per worker: no worker delivers an element more than once
		// per epoch, and a worker that lived delivers each one that often
		// (take/skip: each a subset).
		for w, m := range after.byWorker {
			for v, k := range m {
				if k > epochs {
					t.Fatalf("worker %s delivered element %d %d times, want at most %d", w, v, k, epochs)
				}
			}
			if w == victim || g.Subset {
				continue
			}
			for v := int64(0); v < n; v++ {
				if m[v] != epochs {
					t.Fatalf("worker %s (alive) delivered element %d %d times, want %d (a copy per epoch)", w, v, m[v], epochs)
				}
			}
		}
		if len(after.byWorker) == 0 {
			t.Fatal("nothing delivered")
		}
	case g.Exact:
		for v := lo; v < hi; v++ {
			if all[v] != epochs {
				t.Fatalf("element %d delivered %d times, want exactly %d", v, all[v], epochs)
			}
		}
		if int64(len(all)) != hi-lo {
			t.Fatalf("%d distinct elements, want %d", len(all), hi-lo)
		}
	default:
		var missing int64
		for v := lo; v < hi; v++ {
			if all[v] > epochs {
				t.Fatalf("element %d delivered %d times, want at most %d", v, all[v], epochs)
			}
			missing += int64(epochs - all[v])
		}
		if g.LossCounted {
			if !st.LossCounted {
				t.Fatalf("the loss is stated counted, the client says it is not (stats %+v)", st)
			}
			if st.ElementsLost != missing {
				t.Fatalf("%d element deliveries missing, %d reported lost", missing, st.ElementsLost)
			}
		}
		if len(all) == 0 {
			t.Fatal("nothing delivered")
		}
	}
}
