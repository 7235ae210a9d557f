package client_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// The child process of TestOffloadClientKilled: it joins the job with
// offload local and writes every element Next returns to a file, one
// line per batch, until it is killed.
func TestHelperOffloadClient(t *testing.T) {
	addr, out := os.Getenv("FEEDMESH_OFFLOAD_ADDR"), os.Getenv("FEEDMESH_OFFLOAD_OUT")
	if addr == "" {
		t.Skip("a helper process for TestOffloadClientKilled")
	}
	ctx := context.Background()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, addr, client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, PrefetchBatches: 2})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cl.Distribute(ctx, shuffledSpec(killN, 10, 10, 300), killOptions("local"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := it.Next(ctx)
		if err != nil {
			t.Fatal(err) // the parent kills this process before the end
		}
		var sb strings.Builder
		for _, v := range values(t, b) {
			fmt.Fprintf(&sb, "%d ", v)
		}
		fmt.Fprintf(&sb, "%s\n", b.Worker)
		if _, err := f.WriteString(sb.String()); err != nil {
			t.Fatal(err)
		}
		f.Sync()
	}
}

const killN = 3000

func killOptions(offload string) client.JobOptions {
	return client.JobOptions{Name: "offload-killed", Sharding: client.Dynamic, Offload: offload, LocalCPUs: 1,
		ConsumerTTL: time.Second, GCAfter: time.Minute}
}

// TestOffloadClientKilled: a client reading with a local worker (offload
// local: its own process prepares what it reads, under leases) is
// SIGKILLed mid-read, holding leases; another consumer of the job,
// reading from the nodes, goes on. Once the killed consumer's lease
// expires, its local worker is expired with it and the splits it held
// are read again by the nodes: the job ends, no element reaches the
// trainers twice (the local worker's batches reach its trainer only once
// their receipts are committed), and what neither got is within what the
// cluster counts as abandoned (elements the killed process had received
// and not returned to its trainer).
func TestOffloadClientKilled(t *testing.T) {
	c := testcluster.Start(t, 2)
	out := filepath.Join(t.TempDir(), "child.txt")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOffloadClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FEEDMESH_OFFLOAD_ADDR="+c.Node(0).Addr(), "FEEDMESH_OFFLOAD_OUT="+out)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until the child has read a few batches from its local worker.
	deadline := time.Now().Add(60 * time.Second)
	for n := 0; n < 20; n = len(readLines(t, out)) {
		if time.Now().After(deadline) {
			t.Fatalf("the child read %d batches in 60 s", n)
		}
		time.Sleep(20 * time.Millisecond) // polling a file the child writes
	}
	// The other consumer attaches now (offload remote: the nodes serve
	// it; the job's nodes are off while only the child's local worker
	// reads, so it turns them on).
	b, err := dial(t, c, 1).Distribute(context.Background(), shuffledSpec(killN, 10, 10, 300), killOptions("0"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for n := len(readLines(t, out)); n < 40; n = len(readLines(t, out)) {
		if time.Now().After(deadline) {
			t.Fatalf("the child read %d batches in 60 s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	child := delivery{counts: map[int64]int{}}
	local := 0
	for _, line := range readLines(t, out) {
		f := strings.Fields(line)
		if strings.HasPrefix(f[len(f)-1], "client@") {
			local++ // once the other consumer turned the nodes on, the child reads them too
		}
		for _, s := range f[:len(f)-1] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			child.counts[v]++
		}
	}
	if local < 20 {
		t.Fatalf("the child's local worker prepared %d of its batches", local)
	}
	rest := drain(t, b, 120*time.Second, nil)
	merged := merge(child, rest)
	missing := 0
	for v := int64(0); v < killN; v++ {
		switch merged.counts[v] {
		case 0:
			missing++
		case 1:
		default:
			t.Fatalf("element %d delivered %d times", v, merged.counts[v])
		}
	}
	st := b.Stats()
	t.Logf("child returned %d elements before the kill, the other consumer %d; %d missing; exactly-once counters %+v",
		len(child.counts), len(rest.counts), missing, st.Exact)
	// What the killed process had received and not returned is gone
	// with it, as for any consumer that crashes (Abandoned counts it; a
	// checkpoint resumes without it): never read again by another.
	if st.Exact == nil || int64(missing) > st.Exact.Abandoned {
		t.Fatalf("%d elements reached neither trainer; the cluster counts %+v abandoned", missing, st.Exact)
	}
	if st.Exact.Requeued == 0 {
		t.Errorf("no split of the killed local worker was read again: %+v", st.Exact)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasSuffix(sc.Text(), "") && len(strings.Fields(sc.Text())) > 1 {
			out = append(out, sc.Text())
		}
	}
	return out
}
