package offload

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
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// The child process of TestOffloadClientKilled: it joins the job with
// offload local and writes every batch Next returns to a file, one line
// per batch, then (with a checkpoint path) a checkpoint covering it,
// until it is killed.
func TestHelperOffloadClient(t *testing.T) {
	addr, out, ckpt := os.Getenv("FEEDMESH_OFFLOAD_ADDR"), os.Getenv("FEEDMESH_OFFLOAD_OUT"), os.Getenv("FEEDMESH_OFFLOAD_CKPT")
	if addr == "" {
		t.Skip("a helper process for TestOffloadClientKilled")
	}
	ctx := context.Background()
	fast := transport.FastConfig()
	cl, err := client.Dial(ctx, addr, client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond, PrefetchBatches: 2, OffloadColocation: client.OffloadColocationIgnore})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cl.Distribute(ctx, jobtest.ShuffledSpec(killN, 10, 10, 300), killOptions(os.Getenv("FEEDMESH_OFFLOAD_JOB"), "local"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; ; k++ {
		b, err := it.Next(ctx)
		if err != nil {
			t.Fatal(err) // the parent kills this process before the end
		}
		var sb strings.Builder
		for _, v := range jobtest.Values(t, b) {
			fmt.Fprintf(&sb, "%d ", v)
		}
		fmt.Fprintf(&sb, "%s\n", b.Worker)
		if _, err := f.WriteString(sb.String()); err != nil {
			t.Fatal(err)
		}
		f.Sync()
		if ckpt == "" {
			continue
		}
		// The checkpoint says how many lines it covers: a kill between the
		// line and the checkpoint leaves the line out of it.
		ck, err := it.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ckpt+".tmp", append([]byte(fmt.Sprintf("%d\n", k)), ck...), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(ckpt+".tmp", ckpt); err != nil {
			t.Fatal(err)
		}
	}
}

const killN = 3000

// localAhead is client's localAhead: up to that many of the local
// worker's batches wait for their receipts. This package cannot see it;
// client's TestLocalAheadMirrored fails when the two differ.
const localAhead = 32

func killOptions(name, offload string) client.JobOptions {
	return client.JobOptions{Name: name, Sharding: client.Dynamic, Workers: client.AllWorkers, Offload: offload, LocalCPUs: 1,
		ConsumerTTL: time.Second, GCAfter: time.Minute}
}

// startChild starts the helper process reading job name with offload
// local, and waits until it has returned batches batches.
func startChild(t *testing.T, c *testcluster.Cluster, name, out, ckpt string, batches int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOffloadClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FEEDMESH_OFFLOAD_ADDR="+c.Node(0).Addr(), "FEEDMESH_OFFLOAD_OUT="+out,
		"FEEDMESH_OFFLOAD_CKPT="+ckpt, "FEEDMESH_OFFLOAD_JOB="+name)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitLines(t, out, batches)
	return cmd
}

// waitLines polls the file the child writes until it has n lines.
func waitLines(t *testing.T, out string, n int) {
	deadline := time.Now().Add(60 * time.Second)
	for k := len(readLines(t, out)); k < n; k = len(readLines(t, out)) {
		if time.Now().After(deadline) {
			t.Fatalf("the child returned %d batches in 60 s", k)
		}
		time.Sleep(20 * time.Millisecond) // polling a file another process writes
	}
}

// childDelivery is what the child returned in its first lines lines
// (all when lines < 0), and how many of those batches its local worker
// prepared.
func childDelivery(t *testing.T, out string, lines int) (d jobtest.Delivery, local int) {
	d = jobtest.Delivery{Counts: map[int64]int{}}
	all := readLines(t, out)
	if lines >= 0 {
		all = all[:lines]
	}
	for _, line := range all {
		f := strings.Fields(line)
		if strings.HasPrefix(f[len(f)-1], "client@") {
			local++
		}
		d.Batches++
		for _, s := range f[:len(f)-1] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			d.Counts[v]++
		}
	}
	return d, local
}

// TestOffloadClientKilled: a client reading with a local worker (offload
// local: its own process prepares what it reads, under leases) is
// SIGKILLed mid-read, its local worker holding leases.
//
// continue: another consumer of the job, reading from the nodes, goes on.
// Once the killed consumer's lease expires, its local worker is expired
// with it and the splits it held are read again by the nodes: the job
// ends, and no element reaches the two trainers twice (a local batch
// reaches its trainer only once its receipt is committed). What neither
// got is what the killed process held: unreceipted (counted abandoned) or
// received and not yet returned (its prefetch buffer and the batches
// being put into it).
//
// resume: a new consumer resumes the job from the killed trainer's last
// checkpoint, with a local worker of its own: with what the killed one
// returned up to that checkpoint, every element exactly once.
func TestOffloadClientKilled(t *testing.T) {
	c := testcluster.Start(t, 2)
	t.Run("continue", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "child.txt")
		cmd := startChild(t, c, "killed-continue", out, "", 20)
		// The other consumer attaches now (offload remote: it turns the
		// nodes on, which the child's offload local had turned off).
		b, err := jobtest.Dial(t, c, 1).Distribute(context.Background(), jobtest.ShuffledSpec(killN, 10, 10, 300), killOptions("killed-continue", "remote"))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		waitLines(t, out, 40)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		child, local := childDelivery(t, out, -1)
		if local < 20 {
			t.Fatalf("the child's local worker prepared %d of its batches", local)
		}
		rest := jobtest.Drain(t, b, 120*time.Second, nil)
		merged := jobtest.Merge(child, rest)
		missing := 0
		for v := int64(0); v < killN; v++ {
			switch merged.Counts[v] {
			case 0:
				missing++
			case 1:
			default:
				t.Fatalf("element %d delivered %d times", v, merged.Counts[v])
			}
		}
		st := b.Stats()
		t.Logf("child returned %d elements before the kill, the other consumer %d; %d missing; exactly-once counters %+v",
			len(child.Counts), len(rest.Counts), missing, st.Exact)
		// The child held at most PrefetchBatches (2) + one batch per
		// stream (2 nodes × 2) + the local worker's batches whose receipts
		// may be committed while they wait to be put (localAhead
		// queued, and the one being put), of 10 elements each. (With one
		// for the local worker, this bound failed once in a loaded run:
		// 360 missing, 260 abandoned.)
		const held = (2 + 4 + localAhead + 1) * 10
		if st.Exact == nil || int64(missing) > st.Exact.Abandoned+held {
			t.Fatalf("%d elements reached neither trainer; the cluster counts %+v abandoned, and the child held at most %d", missing, st.Exact, held)
		}
		if st.Exact.Requeued == 0 {
			t.Errorf("no split of the killed local worker was read again: %+v", st.Exact)
		}
	})
	t.Run("resume", func(t *testing.T) {
		dir := t.TempDir()
		out, ckpt := filepath.Join(dir, "child.txt"), filepath.Join(dir, "ckpt")
		cmd := startChild(t, c, "killed-resume", out, ckpt, 30)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		raw, err := os.ReadFile(ckpt)
		if err != nil {
			t.Fatal(err)
		}
		nl, ck, _ := strings.Cut(string(raw), "\n")
		lines, err := strconv.Atoi(nl)
		if err != nil {
			t.Fatal(err)
		}
		before, local := childDelivery(t, out, lines)
		if local == 0 {
			t.Fatal("the child's local worker prepared nothing")
		}
		o := killOptions("killed-resume", "local")
		o.Resume = []byte(ck)
		// The job resumes once the killed consumer's lease has expired.
		cl := jobtest.Dial(t, c, 1)
		deadline := time.Now().Add(30 * time.Second)
		var it *client.Iterator
		for {
			it, err = cl.Distribute(context.Background(), jobtest.ShuffledSpec(killN, 10, 10, 300), o)
			if err == nil {
				break
			}
			if !strings.Contains(err.Error(), "consumer(s) attached") || time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // polling the cluster for the lease's expiry
		}
		defer it.Close()
		after := jobtest.Drain(t, it, 120*time.Second, nil)
		jobtest.CheckExactly(t, jobtest.Merge(before, after), killN, 1)
		t.Logf("child returned %d batches up to its checkpoint (%d of them local); resumed %d batches, stats %+v", lines, local, after.Batches, it.Stats().Offload)
	})
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
