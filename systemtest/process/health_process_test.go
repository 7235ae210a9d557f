package process

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
)

// probe GETs url and returns its status code (0 when nothing answers) and
// body.
func probe(url string) (int, string) {
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthProbesProcess (issue 43, item 2): node processes with
// --metrics-addr, as a Kubernetes pod runs them. The first node alone
// (--bootstrap-expect 3) is alive but not ready; once all three have
// formed, each is ready. A SIGTERM while a job is read makes that node
// not ready at once (it drains, the client Service stops sending it
// clients) while /livez still answers, and the process exits within its
// --drain-timeout and the leave, as terminationGracePeriodSeconds must
// allow.
func TestHealthProbesProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 node processes")
	}
	taken := map[int]bool{}
	nodes := startNodesWith(t, 3, func(i int, np *nodeProcess, all []*nodeProcess) []string {
		// Not a port another node is given and has not bound yet.
		for _, o := range all {
			taken[o.gossip], taken[o.port] = true, true
		}
		for np.metrics == 0 || taken[np.metrics] {
			np.metrics = freePort(t)
		}
		taken[np.metrics] = true
		return []string{"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", np.metrics), "--drain-timeout", "5s"}
	}, 1)
	url := func(i int, path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", nodes[i].metrics, path) }
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := probe(url(0, "/livez"))
		if code == 200 {
			if rc, rb := probe(url(0, "/readyz")); rc != 503 {
				t.Fatalf("the first node alone answers /readyz %d %q, want 503", rc, rb)
			} else {
				t.Logf("first node alone: /livez 200, /readyz 503:\n%s", rb)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first node's /livez never answered: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 1; i < len(nodes); i++ {
		nodes[i].start(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, _ := dialFormed(t, ctx, nodes, 0)
	defer cl.Close()
	for i := range nodes {
		for deadline := time.Now().Add(30 * time.Second); ; {
			code, body := probe(url(i, "/readyz"))
			if code == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready 30 s after formation: %d\n%s", nodes[i].name, code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 4_000_000, SplitSize: 20}})
	spec.Cost(0, 300)
	spec.Batch(10, false)
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: "probed", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for range 30 {
		if _, err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Node 2 drains while the client stops reading: its drain waits for
	// what it queued, up to --drain-timeout 5s.
	victim := nodes[2]
	t0 := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sawNotReady := false
	for !sawNotReady && time.Since(t0) < 5*time.Second {
		code, body := probe(url(2, "/readyz"))
		if code == 503 && strings.Contains(body, "accepting") {
			sawNotReady = true
			if lc, _ := probe(url(2, "/livez")); lc != 200 {
				t.Errorf("/livez while draining: %d, want 200", lc)
			}
			t.Logf("%v after SIGTERM: /readyz 503:\n%s", time.Since(t0).Round(time.Millisecond), body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !sawNotReady {
		t.Error("/readyz never answered 503 after SIGTERM")
	}
	select {
	case err := <-victim.waitErr:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
		victim.waitErr <- err // for the cleanup's kill
		t.Logf("exited %v after SIGTERM (--drain-timeout 5s)", time.Since(t0).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20 s after SIGTERM with --drain-timeout 5s")
	}
}
