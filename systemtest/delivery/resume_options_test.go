package delivery

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/client/offload"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// seedCutProfile writes to the offload profile file path a profile of
// spec (this host's) under which offload auto cuts the pipeline after its
// first op: the host prepares 10 rows a second, the nodes ship the
// shuffled elements at 100 bytes each over a 10 MB/s link, the ops after
// it make them 100 KB (the link would carry 100 of those a second), and
// every op after the cut is cheap. It is what a first job of the pipeline
// leaves behind, in the file its client names (Options.OffloadProfiles),
// when it measured that.
func seedCutProfile(t *testing.T, path string, spec *pipeline.Spec) {
	t.Helper()
	fp, err := spec.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	ops := make([]offload.OpRate, len(spec.Ops))
	for i := range ops {
		ops[i] = offload.OpRate{Seconds: 1e-6, Parallelism: 1, Bytes: 1e5}
	}
	ops[0].Bytes = 100
	p := client.OffloadProfile{Ingest: 1e4, Local: 10, Remote: 10, RemoteMeasured: true, Rows: 300, Ops: ops, LinkBytesPerSecond: 1e7}
	b, err := json.Marshal(map[string]any{fp + "@" + host: map[string]any{"profile": p, "at": time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dialProfiles dials node i of c keeping offload profiles in profiles.
func dialProfiles(t *testing.T, c *testcluster.Cluster, i int, profiles string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, c.Node(i).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, OffloadProfiles: profiles, OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestResumeAdoptsAutoCut (issue 42, bug A): offload auto cuts a job
// (here from this host's remembered profile; a first job cuts itself
// while it runs); the consumer checkpoints and closes, and the job stays
// until gc_after. A resume with the same options, the defaults, adopts
// the job's cut instead of asking for none, and of workers (set for the
// first read only) it adopts the job's too: it reads the rest exactly
// once. A resume that sets a different cut, or another compression, is
// refused with an error that names the option it set and says what to
// do, without the Raft internals.
func TestResumeAdoptsAutoCut(t *testing.T) {
	c := testcluster.Start(t, 3)
	const n = 3000
	spec := func() *pipeline.Spec { return jobtest.ShuffledSpec(n, 20, 10, 100) } // ops: shuffle, cast, cost, batch
	profiles := filepath.Join(t.TempDir(), "profiles.json")
	seedCutProfile(t, profiles, spec())
	cl := dialProfiles(t, c, 0, profiles)
	// LocalCPUs: auto would fall back to remote on a host with no spare
	// CPU measured, before it looks for a cut.
	first := client.JobOptions{Name: "resume-auto-cut", Sharding: client.Dynamic, LocalCPUs: 1, Workers: client.AllWorkers}
	it, err := cl.Distribute(context.Background(), spec(), first)
	if err != nil {
		t.Fatal(err)
	}
	if st := it.Stats().Offload; st.Cut != 1 {
		t.Fatalf("offload auto did not cut the first job after op 1 (the test's premise): %+v", *st)
	}
	before, ck := jobtest.ReadUntil(t, it, 40)

	resume := client.JobOptions{Name: "resume-auto-cut", Sharding: client.Dynamic, Resume: ck}
	for _, tc := range []struct {
		name string
		o    func(client.JobOptions) client.JobOptions
		want []string
	}{
		{"other-cut", func(o client.JobOptions) client.JobOptions { o.OffloadBoundary = 2; return o },
			[]string{"OffloadBoundary 2", "cut after 1 ops", "leave OffloadBoundary unset"}},
		{"other-compression", func(o client.JobOptions) client.JobOptions { o.Compression = "lz4"; return o },
			[]string{"compression", "lz4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), spec(), tc.o(resume))
			if err == nil {
				t.Fatal("a resume with options that conflict with the job's was not refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error without %q: %v", w, err)
				}
			}
			for _, internal := range []string{"apply CreateJob", "at index", "state machine"} {
				if strings.Contains(err.Error(), internal) {
					t.Errorf("error with Raft internals (%q): %v", internal, err)
				}
			}
			t.Logf("refused: %v", err)
		})
	}

	it2, err := dialProfiles(t, c, 1, "off").Distribute(context.Background(), spec(), resume)
	if err != nil {
		t.Fatalf("resume with the default options: %v", err)
	}
	defer it2.Close()
	if st := it2.Stats().Offload; st.Cut != 1 {
		t.Errorf("the resumed consumer did not adopt the job's cut: %+v", *st)
	}
	after := jobtest.Drain(t, it2, 120*time.Second, nil)
	jobtest.CheckExactly(t, jobtest.Merge(before, after), n, 1)
	info, _ := jobtest.JobInfo(t, cl, "resume-auto-cut")
	if info.Options.OffloadBoundary != 1 || info.Options.Workers != client.AllWorkers {
		t.Errorf("the resumed job's options: offload_boundary %d, workers %q; want 1 and all, the first job's", info.Options.OffloadBoundary, info.Options.Workers)
	}
}

// TestResumeAdoptsCutFromCheckpoint: once the cut job is gone (garbage
// collected), a resume under offload auto on a host that remembers no
// profile resumes it as it was, cut where auto cut it: the checkpoint
// carries the job's options.
func TestResumeAdoptsCutFromCheckpoint(t *testing.T) {
	c := testcluster.Start(t, 2)
	const n = 2000
	spec := func() *pipeline.Spec { return jobtest.ShuffledSpec(n, 20, 10, 100) }
	profiles := filepath.Join(t.TempDir(), "profiles.json")
	seedCutProfile(t, profiles, spec())
	cl := dialProfiles(t, c, 0, profiles)
	opts := client.JobOptions{Name: "resume-ck-cut", Sharding: client.Dynamic, LocalCPUs: 1, GCAfter: time.Second}
	it, err := cl.Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if st := it.Stats().Offload; st.Cut != 1 {
		t.Fatalf("offload auto did not cut the job after op 1 (the test's premise): %+v", *st)
	}
	before, ck := jobtest.ReadUntil(t, it, 30)
	c.WaitFor(t, 30*time.Second, "the job to be garbage-collected (gc_after 1 s)", func() bool {
		_, ok := jobtest.JobInfo(t, cl, opts.Name)
		return !ok
	})
	other := dialProfiles(t, c, 1, "off")
	it2, err := other.Distribute(context.Background(), spec(), client.JobOptions{Name: opts.Name, Sharding: client.Dynamic, Resume: ck})
	if err != nil {
		t.Fatal(err)
	}
	defer it2.Close()
	if st := it2.Stats().Offload; st.Cut != 1 || !strings.Contains(st.Reason, "checkpoint") {
		t.Errorf("the resume did not take the cut from the checkpoint: %+v", *st)
	}
	after := jobtest.Drain(t, it2, 120*time.Second, nil)
	jobtest.CheckExactly(t, jobtest.Merge(before, after), n, 1)
	if info, _ := jobtest.JobInfo(t, other, opts.Name); info.Options.OffloadBoundary != 1 {
		t.Errorf("the resumed job's offload_boundary is %d, want 1", info.Options.OffloadBoundary)
	}
}

// TestSecondConsumerAdoptsJobsWorkers (issue 42 item 1): a consumer
// that sets none of the workers options joins a job whose first
// consumer asked for workers auto (or that a release whose default was
// auto created) with the job's workers, instead of a mismatch on an
// option it never set (autoscale=true, not false: the default became
// all). One that sets other workers is still refused.
func TestSecondConsumerAdoptsJobsWorkers(t *testing.T) {
	c := testcluster.Start(t, 3)
	const n = 2000
	spec := func() *pipeline.Spec { return jobtest.RangeSpec(n, 50, 10) }
	first := client.JobOptions{Name: "adopt-workers", Sharding: client.Dynamic, Workers: client.AutoWorkers}
	it1, err := jobtest.Dial(t, c, 0).Distribute(context.Background(), spec(), first)
	if err != nil {
		t.Fatal(err)
	}
	defer it1.Close()
	if _, err := jobtest.Dial(t, c, 2).Distribute(context.Background(), spec(), client.JobOptions{Name: "adopt-workers", Sharding: client.Dynamic, Workers: client.FixedWorkers(1)}); err == nil {
		t.Error("a second consumer asking for 1 worker joined a job of workers auto")
	}
	it2, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), spec(), client.JobOptions{Name: "adopt-workers", Sharding: client.Dynamic})
	if err != nil {
		t.Fatalf("a second consumer that set no workers option: %v", err)
	}
	defer it2.Close()
	ds := jobtest.CollectAll(t, []*client.Iterator{it1, it2}, nil, nil)
	jobtest.CheckExactly(t, jobtest.Merge(ds...), n, 1)
}
