package observe_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/mesh/observe"
	"github.com/feedmesh/feedmesh/testcluster"
)

func hget(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func readiness(t *testing.T, base string) (int, mesh.Readiness) {
	t.Helper()
	code, body := hget(t, base+"/readyz?format=json")
	var rd mesh.Readiness
	if err := json.Unmarshal([]byte(body), &rd); err != nil {
		t.Fatalf("/readyz?format=json: %v: %q", err, body)
	}
	return code, rd
}

func failing(rd mesh.Readiness) []string {
	var out []string
	for _, c := range rd.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// TestHealthEndpoints: /livez and /readyz on real nodes. Before the node
// is attached (the process is starting) /livez answers 200 and /readyz
// 503; on a formed cluster /readyz answers 200 with every check passed;
// a node cut off from the others (Isolate) turns not ready (no other
// member, no leader) and ready again once healed; a node that drains
// (Close, as on SIGTERM) answers 503 on /readyz, "accepting" failing,
// while /livez still answers 200.
func TestHealthEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(i int, cfg *mesh.Config) { cfg.DrainTimeout = 3 * time.Second }))
	srv, err := observe.ListenStarting("127.0.0.1:0", observe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + srv.Addr()
	if code, _ := hget(t, base+"/livez"); code != 200 {
		t.Errorf("/livez while starting: %d, want 200", code)
	}
	if code, body := hget(t, base+"/readyz"); code != 503 || !strings.Contains(body, "starting") {
		t.Errorf("/readyz while starting: %d %q, want 503 starting", code, body)
	}
	if code, _ := hget(t, base+"/metrics"); code != 503 {
		t.Errorf("/metrics while starting: %d, want 503", code)
	}
	srv.Attach(c.Node(1))

	ready := func() bool { code, _ := readiness(t, base); return code == 200 }
	c.WaitFor(t, 30*time.Second, "node 1 ready", ready)
	code, rd := readiness(t, base)
	if code != 200 || !rd.Ready || len(rd.Checks) != 4 {
		t.Fatalf("formed cluster: /readyz %d %+v", code, rd)
	}
	if code, body := hget(t, base+"/readyz"); code != 200 || !strings.Contains(body, "ready") {
		t.Errorf("/readyz as text: %d %q", code, body)
	}

	c.Isolate(1)
	t0 := time.Now()
	c.WaitFor(t, 30*time.Second, "node 1 not ready while cut off", func() bool { return !ready() })
	_, rd = readiness(t, base)
	t.Logf("cut off: not ready after %v, failing %v", time.Since(t0).Round(time.Millisecond), failing(rd))
	c.Heal()
	t0 = time.Now()
	c.WaitFor(t, 60*time.Second, "node 1 ready again once healed", ready)
	t.Logf("healed: ready again after %v", time.Since(t0).Round(time.Millisecond))

	// A job with a consumer that reads nothing: node 1's drain waits for
	// it (up to DrainTimeout), not ready all along.
	it := startJob(t, c, "held", 3)
	_ = it
	closed := make(chan struct{})
	go func() { c.Node(1).Close(); close(closed) }()
	c.WaitFor(t, 5*time.Second, "node 1 not ready while draining", func() bool {
		select {
		case <-closed:
			t.Fatal("node 1 closed before /readyz said it drains")
		default:
		}
		return !ready()
	})
	_, rd = readiness(t, base)
	if f := failing(rd); !slices.Contains(f, "accepting") {
		t.Errorf("draining: failing checks %v, want accepting among them", f)
	}
	if code, _ := hget(t, base+"/livez"); code != 200 {
		t.Errorf("/livez while draining: %d, want 200", code)
	}
	<-closed
}
