package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/testcluster"
)

func init() {
	fn.RegisterFilter("test_cut_even", func(_ *fn.FnContext, e tensor.Element) (bool, error) {
		t, ok := e.Get("value")
		if !ok {
			return false, errors.New("no value")
		}
		v, err := t.Int64Value()
		return v%2 == 0, err
	})
}

// cutSpec: range [0, n) in splits of 20, shuffled across splits, sleepUs
// per element, a random op (r, seeded by the element's epoch, split and
// index), a filter keeping even values, a batch of 10. Cut points 1..4.
func cutSpec(n, sleepUs int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 20}})
	s.Shuffle(64, 7)
	s.Cost(0, sleepUs)
	s.Map("test_autocache_rand", nil, 2)
	s.Filter("test_cut_even", nil)
	s.Batch(10, false)
	return s
}

// draws reads it to the end: each value's draws of r (one per epoch,
// sorted), and the batches read.
func draws(t *testing.T, it *client.Iterator, timeout time.Duration, each func(batches int)) (map[int64][]int64, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, batches := map[int64][]int64{}, 0
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", batches, err)
		}
		batches++
		vs := jobtest.Values(t, b)
		rt, ok := b.Get("r")
		if !ok {
			t.Fatalf("batch without r: %v", b.Element)
		}
		rs, err := rt.Int64s()
		if err != nil || len(rs) != len(vs) {
			t.Fatalf("r: %v (%d values, %d draws)", err, len(vs), len(rs))
		}
		for i, v := range vs {
			out[v] = append(out[v], rs[i])
		}
		b.Release() // the values are copied out; a suffix's batch goes back to it
		if each != nil {
			each(batches)
		}
	}
	for _, rs := range out {
		slices.Sort(rs)
	}
	return out, batches
}

// TestOffloadBoundary: a job cut after each of its cut points (the nodes
// run the ops before it, this client the rest) delivers exactly what the
// whole pipeline run by the nodes delivers, for 2 epochs: the same
// elements once per epoch, with the same random draws (the suffix's
// random op is seeded from each element's provenance). A node killed
// mid-read changes nothing; a checkpoint taken mid-read and resumed in
// a new iterator gives the rest exactly once.
func TestOffloadBoundary(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n = 1000 // the even half passes the filter
	spec := cutSpec(n, 100)
	whole, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: "cut-0", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := draws(t, whole, 60*time.Second, nil)
	whole.Close()
	if len(want) != n/2 {
		t.Fatalf("the whole pipeline delivered %d distinct values, want %d", len(want), n/2)
	}
	for v, rs := range want {
		if len(rs) != 2 || v%2 != 0 {
			t.Fatalf("the whole pipeline delivered value %d with draws %v, want even values twice", v, rs)
		}
	}
	t.Logf("spec cut points: %v", spec.Cuts())
	for _, cut := range spec.Cuts() {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			it, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: fmt.Sprintf("cut-%d", cut), Sharding: client.Dynamic, Workers: client.AllWorkers, Epochs: 2, OffloadBoundary: cut})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			got, batches := draws(t, it, 60*time.Second, nil)
			if len(got) != len(want) {
				t.Errorf("cut %d: %d distinct values, want %d", cut, len(got), len(want))
			}
			differ := 0
			for v, rs := range want {
				if !slices.Equal(got[v], rs) {
					if differ == 0 {
						t.Errorf("cut %d: value %d drew %v, the whole pipeline %v", cut, v, got[v], rs)
					}
					differ++
				}
			}
			if differ > 0 {
				t.Errorf("cut %d: %d of %d values differ from the whole pipeline's", cut, differ, len(want))
			}
			st := it.Stats()
			if st.Offload == nil || st.Offload.Cut != cut || !strings.Contains(st.Offload.Reason, "offload_boundary") {
				t.Errorf("offload stats %+v", st.Offload)
			}
			if st.Batches != int64(batches) || st.Exact == nil || st.Exact.Duplicates != 0 {
				t.Errorf("stats: %d batches (read %d), exactly-once %+v", st.Batches, batches, st.Exact)
			}
			if cut != 2 {
				return
			}
			// The consumer reports its cut to the cluster (`feedmesh jobs`).
			c.WaitFor(t, 10*time.Second, "the cut in the job's offload reports", func() bool {
				jobs, err := cl.Jobs(context.Background())
				if err != nil {
					return false
				}
				for _, j := range jobs {
					for _, o := range j.Offload {
						if j.Name == "cut-2" && o.Cut == 2 && strings.Contains(o.Reason, "offload_boundary 2") {
							return true
						}
					}
				}
				return false
			})
		})
	}
}

// TestOffloadBoundaryKilledAndResumed: with a cut, every element once per
// epoch though a worker is killed mid-read; and a checkpoint taken after
// some batches resumes in a new iterator with exactly the rest.
func TestOffloadBoundaryKilledAndResumed(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n = 3000
	spec := jobtest.ShuffledSpec(n, 20, 10, 200) // ops: shuffle, cast, cost, batch
	opts := client.JobOptions{Name: "cut-kill", Sharding: client.Dynamic, Workers: client.AllWorkers, OffloadBoundary: 2}
	it, err := cl.Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := c.WaitLeader(t, 10*time.Second)
	victim := 1
	if l == 1 {
		victim = 2
	}
	killed := false
	d := jobtest.Drain(t, it, 90*time.Second, func(client.Batch) {
		if !killed && it.Stats().Batches >= 40 {
			killed = true
			c.Kill(victim)
		}
	})
	it.Close()
	if !killed {
		t.Fatal("the job ended before the kill")
	}
	jobtest.CheckExactly(t, d, n, 1)

	// Checkpoint and resume, on the two nodes left.
	opts.Name = "cut-resume"
	it, err = cl.Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	first, ckpt := jobtest.ReadUntil(t, it, 50)
	rest := resumeRest(t, cl, spec, opts, ckpt, first)
	jobtest.CheckExactly(t, rest, n, 1)
	t.Logf("killed %s; resumed after %d batches, %d batches after the resume", c.Name(victim), first.Batches, rest.Batches)
}

// TestOffloadBoundaryAttach: a consumer attached by name to a cut job (a
// trainer without the spec; offload auto cuts first jobs while they run)
// gets the spec from the cluster and runs the ops after the cut: the two
// consumers together read every element once.
func TestOffloadBoundaryAttach(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	const n = 2000
	it1, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 500), client.JobOptions{Name: "cut-attach", Sharding: client.Dynamic, Workers: client.AllWorkers, OffloadBoundary: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer it1.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var vals [2][]int64
	b, err := it1.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vals[0] = jobtest.Values(t, b)
	it2, err := cl.Attach(ctx, "cut-attach")
	if err != nil {
		t.Fatal(err)
	}
	defer it2.Close()
	errs := make(chan error, 2)
	for i, it := range []*client.Iterator{it1, it2} {
		go func() {
			for {
				b, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					errs <- nil
					return
				}
				if err != nil {
					errs <- err
					return
				}
				if b.Worker != client.SuffixWorker {
					errs <- fmt.Errorf("consumer %d: a batch of worker %q in a cut job", i, b.Worker)
					return
				}
				vals[i] = append(vals[i], jobtest.Values(t, b)...)
			}
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	d := jobtest.Delivery{Counts: map[int64]int{}, ByWorker: map[string][]int64{}}
	for _, vs := range vals {
		for _, v := range vs {
			d.Counts[v]++
		}
	}
	jobtest.CheckExactly(t, d, n, 1)
	if len(vals[1]) == 0 {
		t.Fatal("the attached consumer read nothing: the test did not test it")
	}
	if st := it2.Stats(); st.Offload == nil || st.Offload.Cut != 1 {
		t.Fatalf("attached consumer's offload: %+v", st.Offload)
	}
	t.Logf("first consumer %d elements, attached %d", len(vals[0]), len(vals[1]))
}

// TestOffloadBoundaryNextDeadline: a Next whose context expires while the
// client's part waits for elements returns the context's error and ends
// nothing: the calls after it read on, every element once (the Python
// binding waits in short slices this way).
func TestOffloadBoundaryNextDeadline(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	const n = 1000
	it, err := cl.Distribute(context.Background(), jobtest.ShuffledSpec(n, 20, 10, 500), client.JobOptions{Name: "cut-deadline", Sharding: client.Dynamic, Workers: client.AllWorkers, OffloadBoundary: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	d := jobtest.Delivery{Counts: map[int64]int{}, ByWorker: map[string][]int64{}}
	expired := 0
	seqs := map[uint64]bool{}
	end := time.Now().Add(60 * time.Second)
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		b, err := it.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			expired++
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d batches: %v", d.Batches, err)
		}
		d.Batches++
		for _, v := range jobtest.Values(t, b) {
			d.Counts[v]++
		}
		// The client made each batch: its own worker name, its own
		// sequence numbers.
		if b.Worker != client.SuffixWorker || seqs[b.Seq] {
			t.Fatalf("batch %d: worker %q seq %d (seen: %v)", d.Batches, b.Worker, b.Seq, seqs[b.Seq])
		}
		seqs[b.Seq] = true
	}
	jobtest.CheckExactly(t, d, n, 1)
	if expired == 0 {
		t.Fatal("no Next timed out: the test did not test that")
	}
	t.Logf("%d batches, %d calls timed out", d.Batches, expired)
}

// TestOffloadBoundaryResumeWithFilter: a checkpoint of a cut job whose
// client part filters covers what the filter dropped as well as what was
// returned (so it stays small): the resumed iterator delivers exactly the
// kept elements not returned before.
func TestOffloadBoundaryResumeWithFilter(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	const n = 2000
	spec := cutSpec(n, 100) // the filter (ops[3]) keeps even values
	opts := client.JobOptions{Name: "cut-filter-resume", Sharding: client.Dynamic, Workers: client.AllWorkers, OffloadBoundary: 2}
	it, err := cl.Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	first, ckpt := jobtest.ReadUntil(t, it, 30)
	// The dropped odd values count as handled: without them the
	// checkpoint lists a hole at each (820 bytes against 340-410 in
	// ten runs).
	if len(ckpt) > 640 {
		t.Errorf("checkpoint of %d bytes: are the elements the filter dropped left out of it?", len(ckpt))
	}
	rest := resumeRest(t, cl, spec, opts, ckpt, first)
	if len(rest.Counts) != n/2 {
		t.Errorf("%d distinct values, want the %d even ones", len(rest.Counts), n/2)
	}
	for v := int64(0); v < n; v += 2 {
		if rest.Counts[v] != 1 {
			t.Fatalf("value %d delivered %d times, want once", v, rest.Counts[v])
		}
	}
	t.Logf("%d batches before the checkpoint, %d after the resume", first.Batches, rest.Batches)
}

// resumeRest resumes the job of opts from ckpt, reads it to the end, and
// returns what it read added to first (what was read before the
// checkpoint).
func resumeRest(t *testing.T, cl *client.Client, spec *pipeline.Spec, opts client.JobOptions, ckpt []byte, first jobtest.Delivery) jobtest.Delivery {
	t.Helper()
	opts.Resume = ckpt
	it, err := cl.Distribute(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	rest := jobtest.Drain(t, it, 60*time.Second, nil)
	for v, k := range first.Counts {
		rest.Counts[v] += k
	}
	return rest
}

// TestOffloadBoundaryWorkerStats: the per-worker figures count elements
// and batches apart. A job cut after its first op ships single elements:
// every worker counts them as elements (all cut), none as a batch (the
// client made the batches: Stats.Batches); before, each element counted
// as a worker's batch. The same job uncut counts each worker's batches,
// summing to the iterator's, and their elements.
func TestOffloadBoundaryWorkerStats(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := jobtest.Dial(t, c, 0)
	const n, batch = 1200, 10
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 20}})
	spec.Cost(0, 50)
	spec.Batch(batch, false)
	for _, cut := range []int{0, 1} {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
			opts := client.JobOptions{Name: fmt.Sprintf("worker-stats-%d", cut), Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
			if cut > 0 {
				opts.Offload, opts.OffloadBoundary = "", cut
			}
			it, err := cl.Distribute(context.Background(), spec, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			read := 0
			for {
				b, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("after %d batches: %v", read, err)
				}
				read += len(jobtest.Values(t, b))
			}
			st := it.Stats()
			if read != n || st.Rows != n {
				t.Fatalf("read %d elements, stats %d rows; want %d", read, st.Rows, n)
			}
			var batches, elements, cutElements int64
			for w, ws := range st.Workers {
				t.Logf("worker %s: %+v", w, ws)
				batches += ws.Batches
				elements += ws.Elements
				cutElements += ws.CutElements
				if ws.Rows != ws.Elements {
					t.Errorf("worker %s: rows %d, elements %d: rows is elements", w, ws.Rows, ws.Elements)
				}
				if cut > 0 && (ws.Batches != 0 || ws.CutElements != ws.Elements) {
					t.Errorf("worker %s of a cut job: %d batches, %d elements of which %d cut; want no batch and every element cut", w, ws.Batches, ws.Elements, ws.CutElements)
				}
				if cut == 0 && (ws.CutElements != 0 || ws.Batches > ws.Elements || ws.Elements > batch*ws.Batches) {
					t.Errorf("worker %s of a whole job: %d batches, %d elements (%d cut)", w, ws.Batches, ws.Elements, ws.CutElements)
				}
			}
			if len(st.Workers) < 2 {
				t.Errorf("%d workers delivered, want the 3 nodes'", len(st.Workers))
			}
			if elements != n {
				t.Errorf("the workers' elements sum to %d, want %d", elements, n)
			}
			if cut == 0 && batches != st.Batches {
				t.Errorf("the workers' batches sum to %d, the iterator's are %d", batches, st.Batches)
			}
			if cut > 0 && (batches != 0 || cutElements != n || st.Batches < n/batch) {
				t.Errorf("cut job: workers' batches %d, cut elements %d, iterator's batches %d; want 0, %d, at least %d", batches, cutElements, st.Batches, n, n/batch)
			}
		})
	}
}
