package sharing

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/testcluster"
)

func init() {
	// (test_autocache_rand, the random op after the autocache point, is
	// jobtest's.)
	// A cheap op that makes large elements: 64 KiB of zeros.
	fn.RegisterMap("test_autocache_big", func(_ *fn.FnContext, e tensor.Element) (tensor.Element, error) {
		e.Set(tensor.BytesScalar("big", make([]byte, 64<<10)))
		return e, nil
	})
}

// expensivePrefix: range [0, n) in splits of split, cpuUs of CPU per
// element (deterministic), then autocache (mode), then a random op and a
// batch of batch.
func expensivePrefix(n, split, cpuUs int64, mode string, batch int64) *pipeline.Spec {
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: split}})
	s.Cost(cpuUs, 0).AutocacheMode(mode).Map("test_autocache_rand", nil, 1).Batch(batch, false)
	return s
}

// cacheTotals sums the nodes' autocache counters.
func cacheTotals(c *testcluster.Cluster) (t mesh.CacheStats) {
	for _, i := range c.Running() {
		s := c.Node(i).CacheStats()
		t.Entries += s.Entries
		t.Puts += s.Puts
		t.Hits += s.Hits
		t.Fetched += s.Fetched
		t.Corrupt += s.Corrupt
		t.Stale += s.Stale
	}
	return t
}

// autocacheConfig: small leases (no failover lead), so that DYNAMIC's
// overlapping epochs do not read a split of epoch 2 while its epoch-1
// reading is still being put; workers ask their peers what they hold at
// every miss (HeldTTL), so that the counts below are exact; profiling on
// 100 elements.
func autocacheConfig(_ int, cfg *mesh.Config) {
	cfg.Autocache.HeldTTL = time.Microsecond
	cfg.Worker.FailoverAhead = -1
	cfg.Worker.LeaseSplits = 2
	cfg.Autocache.ProfileElements = 100
	cfg.Autocache.ProbeBytes = 256 << 10
}

// Issue 16, test 3 (first part): an expensive deterministic prefix, then
// a random op, over 3 epochs of an exactly-once DYNAMIC job on 3 nodes:
// epoch 1 puts every split, epochs 2 and 3 get every split (from the
// node's own disk or a peer's over QUIC), every element arrives once per
// epoch, and the random op still differs between epochs. The decision
// (auto) is cache, with its inputs in the job's stats.
func TestAutocacheExpensivePrefixPutsThenGets(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(autocacheConfig))
	cl := jobtest.Dial(t, c, 0)
	const n, split = 1200, 30
	it, err := cl.Distribute(context.Background(), expensivePrefix(n, split, 400, pipeline.AutocacheAuto, 10),
		client.JobOptions{Name: "ac-epochs", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	rs := map[int64][]int64{}
	d := jobtest.Drain(t, it, 120*time.Second, func(b client.Batch) {
		vs := jobtest.Values(t, b)
		rt, ok := b.Get("r")
		if !ok {
			t.Fatal("batch without r")
		}
		r, _ := rt.Int64s()
		for i, v := range vs {
			rs[v] = append(rs[v], r[i])
		}
	})
	jobtest.CheckExactly(t, d, n, 3)
	same := 0
	for _, r := range rs {
		if r[0] == r[1] || r[1] == r[2] || r[0] == r[2] {
			same++
		}
	}
	if same > 0 {
		t.Errorf("the random op after autocache repeated its value across epochs for %d of %d elements", same, n)
	}
	tot := cacheTotals(c)
	const splits = n / split
	t.Logf("cache totals %+v", tot)
	if tot.Puts != splits || tot.Hits+tot.Fetched != 2*splits {
		t.Errorf("puts %d, gets %d local + %d from peers; want %d puts (epoch 1) and %d gets (epochs 2, 3)",
			tot.Puts, tot.Hits, tot.Fetched, splits, 2*splits)
	}
	// Leases hand a worker the splits it holds first: most gets are from
	// the worker's own disk. (Leases in the cursor's order, sized to the
	// runs a worker holds, gave 20 to 26 local gets of 80.)
	if tot.Hits <= tot.Fetched {
		t.Errorf("%d gets from the worker's own cache, %d from peers: want most local", tot.Hits, tot.Fetched)
	}
	ac := waitDecision(t, c, "ac-epochs")
	if ac.Decided() != "cache" || ac.Decision.ComputeSeconds <= ac.Decision.ReadSeconds || ac.Decision.BytesPerElement <= 0 {
		t.Errorf("decision %+v, want cache with compute > read", ac.Decision)
	}
	st := it.Stats()
	if len(st.Autocache) != 1 || st.Autocache[0].Decision == nil {
		t.Errorf("client stats autocache %+v, want the decision", st.Autocache)
	}
}

// waitDecision waits until the job's single autocache point has a
// recorded decision, and returns it.
func waitDecision(t *testing.T, c *testcluster.Cluster, job string) api.AutocacheInfo {
	t.Helper()
	var got api.AutocacheInfo
	c.WaitFor(t, 20*time.Second, "the autocache decision of "+job, func() bool {
		_, l := c.Leader()
		if l == nil {
			return false
		}
		jobs, err := l.Jobs(context.Background())
		if err != nil {
			return false
		}
		for _, j := range jobs {
			if j.Name == job && len(j.Autocache) == 1 && j.Autocache[0].Decision != nil {
				got = j.Autocache[0]
				return true
			}
		}
		return false
	})
	return got
}

// Issue 16, test 3 (second part): a cheap prefix with large elements, on
// nodes whose cache reads are throttled to 1 MB/s, chooses compute; after
// the decision, nothing is read from the cache.
func TestAutocacheCheapPrefixSlowDiskComputes(t *testing.T) {
	c := testcluster.Start(t, 2, testcluster.WithConfig(func(i int, cfg *mesh.Config) {
		autocacheConfig(i, cfg)
		cfg.Autocache.ReadBytesPerSec = 1 << 20
		cfg.Autocache.ProfileElements = 40
		cfg.Autocache.ProbeBytes = 128 << 10
	}))
	cl := jobtest.Dial(t, c, 0)
	s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 400, SplitSize: 20}})
	s.Map("test_autocache_big", nil, 1).Autocache().Batch(10, false)
	it, err := cl.Distribute(context.Background(), s, client.JobOptions{Name: "ac-cheap", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	jobtest.CheckExactly(t, jobtest.Drain(t, it, 60*time.Second, nil), 400, 1)
	it.Close()
	ac := waitDecision(t, c, "ac-cheap")
	if ac.Decided() != "compute" || ac.Decision.ReadSeconds <= ac.Decision.ComputeSeconds || ac.Decision.ReadBytesPerSec > 1<<20 {
		t.Fatalf("decision %+v, want compute (the cache reads at most 1 MB/s)", ac.Decision)
	}
	before := cacheTotals(c)
	it, err = cl.Distribute(context.Background(), s, client.JobOptions{Name: "ac-cheap-2", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	jobtest.CheckExactly(t, jobtest.Drain(t, it, 60*time.Second, nil), 400, 1)
	it.Close()
	after := cacheTotals(c)
	if after.Hits != before.Hits || after.Fetched != before.Fetched || after.Puts != before.Puts {
		t.Fatalf("after a compute decision the cache was used: %+v then %+v", before, after)
	}
}

// Issue 16, test 3 (rest): a second job with the same prefix reads the
// first one's cache; a restarted node keeps its cache; a truncated cache
// file and one with a flipped bit are detected and their splits computed,
// never served wrong.
func TestAutocacheSharedRestartCorrupt(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(autocacheConfig))
	const n, split = 600, 20
	const splits = n / split
	run := func(name string, batch int64) {
		t.Helper()
		cl := jobtest.Dial(t, c, 0)
		it, err := cl.Distribute(context.Background(), expensivePrefix(n, split, 200, pipeline.AutocacheCache, batch),
			client.JobOptions{Name: name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		jobtest.CheckExactly(t, jobtest.Drain(t, it, 60*time.Second, nil), n, 1)
	}
	run("ac-first", 10)
	first := cacheTotals(c)
	if first.Puts != splits {
		t.Fatalf("first job: %+v, want %d puts", first, splits)
	}
	// Another job, another suffix (batch 7), the same prefix.
	run("ac-second", 7)
	second := cacheTotals(c)
	if second.Puts != splits || second.Hits+second.Fetched != splits {
		t.Fatalf("second job: %+v, want every split read from the first job's cache", second)
	}

	// Kill node 1 and start it again: its entries come back from its
	// files.
	held := c.Node(1).CacheStats().Entries
	if held == 0 {
		t.Fatal("node 1 cached nothing; the restart would prove nothing")
	}
	c.Kill(1)
	if err := c.Restart(1); err != nil {
		t.Fatal(err)
	}
	if got := c.Node(1).CacheStats().Entries; got != held {
		t.Fatalf("node 1 held %d entries, %d after its restart", held, got)
	}
	c.WaitFor(t, 20*time.Second, "every node to see three live members", func() bool {
		for i := range 3 {
			alive := 0
			for _, m := range c.Node(i).Members() {
				if m.Status == api.StatusAlive {
					alive++
				}
			}
			if alive != 3 {
				return false
			}
		}
		return true
	})

	// Damage two files of node 2: truncate one, flip a bit in another.
	files, _ := filepath.Glob(filepath.Join(c.DataDir(2), "cache", "*", "*.fmc"))
	if len(files) < 2 {
		t.Fatalf("node 2 holds %d cache files, want 2 to damage", len(files))
	}
	b, _ := os.ReadFile(files[0])
	os.WriteFile(files[0], b[:len(b)-40], 0o644)
	b, _ = os.ReadFile(files[1])
	b[len(b)-40] ^= 0x55
	os.WriteFile(files[1], b, 0o644)
	before := cacheTotals(c)
	run("ac-third", 10)
	after := cacheTotals(c)
	t.Logf("before %+v, after %+v", before, after)
	if after.Corrupt-before.Corrupt != 2 {
		t.Errorf("%d damaged files detected, want 2", after.Corrupt-before.Corrupt)
	}
	// The truncated split is computed whole and put again; the other is
	// read up to the bad record and the rest computed (not put: it was
	// not computed whole).
	if after.Puts-before.Puts != 1 {
		t.Errorf("%d splits put again, want 1 (the truncated one)", after.Puts-before.Puts)
	}
}

// Issue 42, item 5: the autocache never serves stale data. A file
// rewritten between two jobs (the same size, other contents) is read
// anew by the second job: the cached split was stamped with the file's
// size and modification time, which no longer match, so it is dropped
// and computed again; a job after it gets the new contents from the
// cache.
func TestAutocacheRewrittenFileIsReadAnew(t *testing.T) {
	dir := t.TempDir() // the node's data root
	c := testcluster.Start(t, 1, testcluster.WithConfig(autocacheConfig), testcluster.WithConfig(func(_ int, cfg *mesh.Config) { cfg.DataRoots = []string{dir} }))
	cl := jobtest.Dial(t, c, 0)
	path := filepath.Join(dir, "data.txt")
	write := func(word string, mtime time.Time) {
		t.Helper()
		var b []byte
		for range 50 {
			b = append(b, word+"\n"...)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	read := func(job string) (map[string]int, client.Stats) {
		t.Helper()
		spec := pipeline.NewSpec(pipeline.FromFiles("lines", path)).Cost(10, 0).AutocacheMode(pipeline.AutocacheCache)
		it, err := cl.Distribute(context.Background(), spec,
			client.JobOptions{Name: job, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		words := map[string]int{}
		for {
			b, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return words, it.Stats()
			}
			if err != nil {
				t.Fatalf("job %s: %v", job, err)
			}
			words[string(b.Element.Tensors[0].Data)]++
			b.Release()
		}
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	write("alpha", t0)
	if got, _ := read("first"); got["alpha"] != 50 || len(got) != 1 {
		t.Fatalf("first job read %v, want 50 alpha", got)
	}
	if st := cacheTotals(c); st.Puts != 1 {
		t.Fatalf("the first job put %d splits, want 1", st.Puts)
	}
	write("omega", t0.Add(time.Second)) // same size, later modification time
	if got, _ := read("second"); got["omega"] != 50 || len(got) != 1 {
		t.Fatalf("after the file was rewritten the second job read %v, want 50 omega (the cache served stale data)", got)
	}
	st := cacheTotals(c)
	if st.Stale != 1 || st.Puts != 2 {
		t.Fatalf("cache counters %+v: want the stale split dropped once and put again", st)
	}
	if got, _ := read("third"); got["omega"] != 50 || len(got) != 1 {
		t.Fatalf("the third job read %v, want 50 omega", got)
	}
	if st := cacheTotals(c); st.Hits < 1 {
		t.Fatalf("the third job did not read the new contents from the cache: %+v", st)
	}
}
