package delivery

import (
	"context"
	"errors"
	"github.com/feedmesh/feedmesh/api"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// tokensByID reads a text job to the end and returns each element's valid
// tokens by id, and the iterator's final stats.
func tokensByID(t *testing.T, it *client.Iterator) (map[int64][]int32, client.Stats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[int64][]int32{}
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, it.Stats()
		}
		if err != nil {
			t.Fatalf("after %d elements: %v", len(out), err)
		}
		tok, _ := b.Get("tokens")
		lens, _ := b.Get("tokens_length")
		ids, _ := b.Get("id")
		tv, err1 := tok.Int32s()
		lv, err2 := lens.Int32s()
		iv, err3 := ids.Int64s()
		if err := errors.Join(err1, err2, err3); err != nil || len(tok.Shape) != 2 {
			t.Fatalf("batch %+v: %v", b.Element, err)
		}
		width := int(tok.Shape[1])
		for r, id := range iv {
			row := tv[r*width : (r+1)*width]
			for _, pad := range row[lv[r]:] {
				if pad != 0 {
					t.Fatalf("element %d: padding %d", id, pad)
				}
			}
			out[id] = slices.Clone(row[:lv[r]])
		}
		b.Release()
	}
}

// A job's compression reaches every stream: lz4 and zstd jobs deliver the
// same tokens as an uncompressed job of the same dataset, in fewer bytes
// on the wire, and the job lists its compression.
func TestJobCompression(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	spec := jobtest.TextSpec(3000, 100)
	got := map[string]map[int64][]int32{}
	wire := map[string]float64{} // wire bytes per delivered byte
	for _, comp := range []string{"none", "lz4", "zstd"} {
		it, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: "text-" + comp, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Compression: comp})
		if err != nil {
			t.Fatal(err)
		}
		toks, st := tokensByID(t, it)
		it.Close()
		if len(toks) != 3000 {
			t.Fatalf("%s: %d elements, want 3000", comp, len(toks))
		}
		if st.WireBytes <= 0 || st.Bytes <= 0 {
			t.Fatalf("%s: stats %+v", comp, st)
		}
		got[comp], wire[comp] = toks, float64(st.WireBytes)/float64(st.Bytes)
		t.Logf("%s: %d bytes delivered, %d on the wire (%.3f)", comp, st.Bytes, st.WireBytes, wire[comp])
	}
	for _, comp := range []string{"lz4", "zstd"} {
		for id, want := range got["none"] {
			if !slices.Equal(got[comp][id], want) {
				t.Fatalf("%s: element %d has tokens %v, uncompressed %v", comp, id, got[comp][id], want)
			}
		}
		if wire[comp] > 0.9*wire["none"] {
			t.Errorf("%s: %.3f wire bytes per byte, uncompressed %.3f", comp, wire[comp], wire["none"])
		}
	}
	jobs, err := cl.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, j := range jobs {
		listed[j.Name] = j.Options.Compression
	}
	if listed["text-lz4"] != "lz4" || listed["text-zstd"] != "zstd" || listed["text-none"] != "" {
		t.Fatalf("jobs list compression %v", listed)
	}
}

// A bad compression name is refused before anything is registered, and a
// consumer cannot join a job with another compression.
func TestJobCompressionErrors(t *testing.T) {
	c := testcluster.Start(t, 1)
	cl := jobtest.Dial(t, c, 0)
	ctx := context.Background()
	_, err := cl.Distribute(ctx, jobtest.RangeSpec(10, 5, 5), client.JobOptions{Name: "bad", Compression: "snappy"})
	if err == nil || !strings.Contains(err.Error(), "zstd") {
		t.Fatalf("compression snappy: %v, want an error naming the choices", err)
	}
	if jobs, _ := cl.Jobs(ctx); len(jobs) != 0 {
		t.Fatalf("a job was registered: %+v", jobs)
	}
	it, err := cl.Distribute(ctx, jobtest.SlowSpec(200, 10, 10, 100), client.JobOptions{Name: "j", Compression: "lz4"})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	_, err = cl.Distribute(ctx, jobtest.SlowSpec(200, 10, 10, 100), client.JobOptions{Name: "j", Compression: "zstd"})
	if err == nil || !strings.Contains(err.Error(), "compression") {
		t.Fatalf("joining with another compression: %v, want an error naming compression", err)
	}
	// "none" and "" are the same option.
	it2, err := cl.Distribute(ctx, jobtest.SlowSpec(200, 10, 10, 100), client.JobOptions{Name: "k", Compression: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer it2.Close()
	it3, err := cl.Distribute(ctx, jobtest.SlowSpec(200, 10, 10, 100), client.JobOptions{Name: "k"})
	if err != nil {
		t.Fatalf(`joining a "none" job with "": %v`, err)
	}
	it3.Close()
}

// Sharing jobs with different compressions share one production: each
// stream gets the shared frames in its own job's compression.
func TestShareMixedCompression(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	const n, batch = 4000, 100
	spec := jobtest.SlowSpec(n, 200, batch, 100)
	comps := []string{"none", "lz4", "zstd"}
	its := make([]*client.Iterator, len(comps))
	for i, comp := range comps {
		it, err := cl.Distribute(context.Background(), spec, client.JobOptions{Name: "mixed-" + comp, Sharding: client.Off, Share: true, Compression: comp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { it.Close() })
		its[i] = it
	}
	ds := jobtest.CollectAll(t, its, nil, nil)
	wire := make([]float64, len(comps))
	for i, d := range ds {
		jobtest.CheckExactly(t, d, n, 2)
		st := its[i].Stats()
		wire[i] = float64(st.WireBytes) / float64(st.Bytes)
		t.Logf("%s: %d bytes, %d on the wire", comps[i], st.Bytes, st.WireBytes)
	}
	if wire[1] > 0.9*wire[0] || wire[2] > 0.9*wire[0] {
		t.Errorf("wire bytes per byte: %v (none, lz4, zstd)", wire)
	}
	oneJob := int64(2 * n / batch)
	if _, all := jobtest.SharedWork(c); float64(all) > 1.1*float64(oneJob) {
		t.Errorf("workers produced %d batches for 3 sharing jobs; one job needs %d", all, oneJob)
	}
}

// The job's options decide compression, not the stream: a worker asked
// for a compression its job does not have sends the batches uncompressed
// and says so in its Accept.
func TestWorkerEnforcesJobCompression(t *testing.T) {
	c := testcluster.Start(t, 2)
	cl := jobtest.Dial(t, c, 0)
	codec, err := transport.NewCodec(transport.DefaultConfig().MaxHeaderBytes, transport.DefaultConfig().MaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		job       string
		ask, want batch.Compression
	}{
		{"none", batch.CompressLZ4, batch.CompressNone},
		{"lz4", batch.CompressLZ4, batch.CompressLZ4},
		{"lz4", batch.CompressZstd, batch.CompressNone},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		it, err := cl.Distribute(ctx, jobtest.TextSpec(3000, 100), client.JobOptions{Name: "enforce-" + tc.job + "-" + tc.ask.String(), Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers, Compression: tc.job})
		if err != nil {
			t.Fatal(err)
		}
		// The job's own consumer reads it to its end meanwhile: node 1
		// may have leased every split before node 0's task started, and
		// node 0 then says its end of data only once the job has ended.
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for {
				if _, err := it.Next(ctx); err != nil {
					return
				}
			}
		}()
		// A consumer of our own (its attach answers its capability), and
		// its stream to node 0's worker, asking for tc.ask.
		raw := "raw-" + tc.ask.String()
		var attached api.JobInfo
		if err := transport.Call(ctx, c.Node(1).Transport(), codec, c.Node(0).Addr(), api.MethodHeartbeat, api.JobRequest{Job: it.Job(), Consumer: raw}, &attached); err != nil {
			t.Fatal(err)
		}
		rcv, err := batch.OpenConfig(ctx, c.Node(1).Transport(), codec, c.Node(0).Addr(),
			batch.OpenRequest{Job: it.Job(), Consumer: raw, Window: 2, Compression: tc.ask, Capability: attached.Capability}, batch.ReceiverConfig{})
		if err != nil {
			t.Fatal(err)
		}
		// (That frames follow the Accept is TestAcceptWithChoosesCompression's.)
		// The job may have run out of splits for node 0 already: an end
		// of data after the Accept still says what the worker put in
		// force.
		_, _, err = rcv.Next(ctx)
		rcv.Close()
		it.Close()
		<-drained
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("job %s, asking %v: %v", tc.job, tc.ask, err)
		}
		if got := rcv.Compression(); got != tc.want {
			t.Fatalf("job %s, asking %v: the worker put %v in force, want %v", tc.job, tc.ask, got, tc.want)
		}
	}
}
