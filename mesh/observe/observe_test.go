package observe_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/mesh/observe"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
)

// slowSpec is a DYNAMIC-friendly pipeline whose cost map bounds it.
const slowSpec = `source:
  range: {stop: 100000000, split_size: 200}
ops:
  - map: {fn: cost, args: {cpu_us: 300}}
  - batch: {size: 8}
`

// startJob starts job on c through node 1 and reads n batches of it; the
// iterator stays open (the job keeps running) until the test ends.
func startJob(t *testing.T, c *testcluster.Cluster, job string, n int) *client.Iterator {
	t.Helper()
	spec, err := pipeline.ParseYAML([]byte(slowSpec))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cl, err := client.Dial(ctx, c.Node(1).Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: job, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { it.Close() })
	read(t, it, n)
	return it
}

func read(t *testing.T, it *client.Iterator, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := it.Next(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, url string) (string, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), resp.Header
}

// scrape parses /metrics as Prometheus text exposition.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	text, hdr := get(t, base+"/metrics")
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("metrics content type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("/metrics does not parse as Prometheus text: %v\n%s", err, text)
	}
	return fams
}

// value returns the value of the family's sample whose labels include
// want, and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		match := true
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount()), true
		}
	}
	return 0, false
}

// A node's /metrics parses as Prometheus text and shows a running job's
// counters rising; /status.json has the job, its per-op statistics and a
// diagnosis naming the cost map.
func TestMetricsAndStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 3)
	srv, err := observe.Listen("127.0.0.1:0", c.Node(1), observe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + srv.Addr()
	it := startJob(t, c, "watched", 40)

	job := map[string]string{"job": "watched"}
	// The node may not have started its task yet when the first batches
	// arrive from the others: scrape until it has, reading on.
	var first map[string]*dto.MetricFamily
	for deadline := time.Now().Add(time.Minute); ; {
		first = scrape(t, base)
		if _, ok := value(first, "feedmesh_op_busy_seconds_total", job); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the node reports no per-op statistics for the job after a minute")
		}
		read(t, it, 5)
	}
	for _, name := range []string{"feedmesh_node_info", "feedmesh_members", "feedmesh_raft_leader", "feedmesh_raft_term",
		"feedmesh_raft_commands_applied_total", "feedmesh_raft_apply_seconds", "feedmesh_jobs", "feedmesh_job_workers", "feedmesh_mesh_nodes_wanted", "feedmesh_mesh_worker_nodes",
		"feedmesh_task_batches_total", "feedmesh_op_elements_total", "feedmesh_op_busy_seconds_total",
		"feedmesh_worker_batches_encoded_total", "feedmesh_transport_receive_window_bytes", "feedmesh_transport_data_streams", "feedmesh_transport_refused_total", "feedmesh_gossip_packets_sent_total",
		"feedmesh_gossip_packet_bytes_sent_total", "feedmesh_gossip_streams_total", "feedmesh_gossip_stream_bytes_total", "feedmesh_rpc_requests_total", "go_goroutines"} {
		if _, ok := first[name]; !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if v, _ := value(first, "feedmesh_members", map[string]string{"status": "alive"}); v != 3 {
		t.Errorf("feedmesh_members{status=alive} = %v, want 3", v)
	}
	if v, _ := value(first, "feedmesh_mesh_worker_nodes", nil); v != 3 {
		t.Errorf("feedmesh_mesh_worker_nodes = %v, want 3", v)
	}
	// A node of a 3-node cluster has probed and gossiped (memberlist
	// packs several messages in a packet of at most 1400 bytes), and
	// joining made at least one push/pull stream on one of them.
	if p, _ := value(first, "feedmesh_gossip_packets_sent_total", nil); p < 1 {
		t.Errorf("feedmesh_gossip_packets_sent_total = %v", p)
	} else if b, _ := value(first, "feedmesh_gossip_packet_bytes_sent_total", nil); b < p || b > 1400*p {
		t.Errorf("feedmesh_gossip_packet_bytes_sent_total = %v for %v packets", b, p)
	}
	// The job's client dialled this node and distributed the job through
	// it; a method nobody called is listed at 0.
	if v, _ := value(first, "feedmesh_rpc_requests_total", map[string]string{"method": api.MethodDistribute}); v < 1 {
		t.Errorf("feedmesh_rpc_requests_total{method=%s} = %v", api.MethodDistribute, v)
	}
	if _, ok := value(first, "feedmesh_rpc_requests_total", map[string]string{"method": api.MethodLease}); !ok {
		t.Errorf("feedmesh_rpc_requests_total has no method=%s", api.MethodLease)
	}
	if v, ok := value(first, "feedmesh_raft_term", nil); !ok || v < 1 {
		t.Errorf("feedmesh_raft_term = %v", v)
	}
	if v, _ := value(first, "feedmesh_job_splits_leased_total", job); v < 1 {
		t.Errorf("feedmesh_job_splits_leased_total{job=watched} = %v", v)
	}
	b1, ok := value(first, "feedmesh_task_batches_total", job)
	if !ok {
		t.Fatalf("no feedmesh_task_batches_total for the job")
	}
	e1, _ := value(first, "feedmesh_op_elements_total", map[string]string{"job": "watched", "op": "map(cost)"})

	// Read more: the counters rise (the task is back-pressured by its
	// queue, so what rises is what the consumer takes).
	deadline := time.Now().Add(time.Minute)
	for {
		read(t, it, 20)
		next := scrape(t, base)
		b2, _ := value(next, "feedmesh_task_batches_total", job)
		e2, _ := value(next, "feedmesh_op_elements_total", map[string]string{"job": "watched", "op": "map(cost)"})
		if b2 > b1 && e2 > e1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after reading on for a minute, batches %v → %v, cost map elements %v → %v: not rising", b1, b2, e1, e2)
		}
	}

	// The snapshot asks the leader for the jobs: on a loaded machine an
	// election can make one answer stale; ask again until one is not.
	var (
		s    observe.Snapshot
		js   *observe.JobSnapshot
		text string
	)
	for deadline := time.Now().Add(time.Minute); ; {
		text, _ = get(t, base+"/status.json")
		s, js = observe.Snapshot{}, nil
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			t.Fatalf("status.json: %v\n%s", err, text)
		}
		for i := range s.Jobs {
			if s.Jobs[i].Name == "watched" {
				js = &s.Jobs[i]
			}
		}
		if !s.JobsStale && js != nil && js.Diagnosis != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fresh snapshot of job watched with a diagnosis in a minute: %s", text)
		}
	}
	if len(s.Members) != 3 || s.Node.Name != c.Node(1).Name() {
		t.Errorf("status: %d members, node %q", len(s.Members), s.Node.Name)
	}
	if js.Batches <= 0 || len(js.Ops) != 3 || js.Diagnosis.BoundingOp != "map(cost)" {
		t.Fatalf("job snapshot: %d batches, %d ops, diagnosis %+v", js.Batches, len(js.Ops), js.Diagnosis)
	}
	if js.Ops[js.Bounding].Name != "map(cost)" {
		t.Errorf("bounding op %d %q", js.Bounding, js.Ops[js.Bounding].Name)
	}

	page, hdr := get(t, base+"/")
	if !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(page, "status.json") {
		t.Errorf("status page: %s, %d bytes", hdr.Get("Content-Type"), len(page))
	}
	for _, ext := range []string{"http://", "https://", "//cdn", "<link"} {
		if strings.Contains(page, ext) {
			t.Errorf("the status page refers to %q: it must work offline", ext)
		}
	}
	if s.At.IsZero() {
		t.Error("snapshot without a time")
	}
}
