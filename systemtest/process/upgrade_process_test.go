package process

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/pipeline"
)

// previousRelease is the last commit of the release before protocol
// levels (fsm.Protocol): its nodes propose CreateJob v1..v5, write
// snapshot format 2, advertise no level, and refuse CreateJob v6.
const previousRelease = "78098e8"

// previousBinary builds cmd/feedmesh of previousRelease from this
// repository's history (git archive: no work tree is touched), or skips
// when the history does not hold it (a shallow clone).
func previousBinary(t *testing.T) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v): the upgrade test builds the previous release from its history", err)
	}
	root := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", root, "cat-file", "-e", previousRelease+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this clone's history (shallow?): the upgrade test builds the previous release from it", previousRelease)
	}
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", previousRelease)
	untar := exec.Command("tar", "-x", "-C", src)
	var err1, err2 bytes.Buffer
	archive.Stderr, untar.Stderr = &err1, &err2
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v: %s", previousRelease, err, err1.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar %s: %v: %s", previousRelease, err, err2.String())
	}
	bin := filepath.Join(t.TempDir(), "feedmesh-previous")
	build := exec.Command("go", "build", "-o", bin, "./cmd/feedmesh")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release %s: %v\n%s", previousRelease, err, out)
	}
	return bin
}

// TestRollingUpgradeProcesses (issue 43, item 6): a 3-node cluster of the
// previous release's binary is upgraded to this one, one node at a time
// (SIGTERM, start the new binary on the same data dir), while an
// exactly-once job is read, and new jobs are created between the steps:
// the new nodes write at the cluster's protocol level (the least its
// servers speak: legacy until the last old node is gone), so no node
// refuses a command, every element of every job arrives once, and the
// cluster reaches this release's level at the end.
func TestRollingUpgradeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and starts 3 node processes, and each again")
	}
	old := previousBinary(t)
	nodes := startNodes(t, 3, func(np *nodeProcess) { np.bin = old })
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	cl, _ := dialFormed(t, ctx, nodes, 0)
	defer cl.Close()
	const n = 6000
	spec := func() *pipeline.Spec {
		s := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: n, SplitSize: 20}})
		s.Cost(0, 300)
		s.Batch(10, false)
		return s
	}
	opts := func(name string) client.JobOptions {
		return client.JobOptions{Name: name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	}
	it, err := cl.Distribute(ctx, spec(), opts("upgrade-long"))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	counts := make([]int, n)
	step := 0
	readValues(t, ctx, it, counts, 1<<30, func(batches int) {
		if step >= len(nodes) || batches < 120*(step+1) {
			return
		}
		nodes[step].stop(t, 60*time.Second)
		nodes[step].bin = "" // this tree's binary
		nodes[step].start(t)
		step++
		// A job created in the mixed cluster: the new nodes must not
		// propose what the old ones refuse.
		short := readJob(t, ctx, cl, spec(), opts(fmt.Sprintf("upgrade-step-%d", step)))
		for v, k := range short {
			if k != 1 {
				t.Fatalf("job created after upgrading %d node(s): element %d delivered %d times", step, v, k)
			}
		}
	})
	if step != len(nodes) {
		t.Fatalf("the long job ended after %d of %d upgrades", step, len(nodes))
	}
	for v, k := range counts {
		if k != 1 {
			t.Fatalf("element %d of the job read through the upgrade delivered %d times", v, k)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := cl.Status(ctx)
		if err == nil && st.Protocol == fsm.Protocol {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upgraded cluster's protocol: %+v (%v), want %d", st.Protocol, err, fsm.Protocol)
		}
		time.Sleep(100 * time.Millisecond)
	}
	final := readJob(t, ctx, cl, spec(), opts("upgrade-after"))
	for v, k := range final {
		if k != 1 {
			t.Fatalf("job created after the upgrade: element %d delivered %d times", v, k)
		}
	}
}

// readJob reads a whole job and counts its elements.
func readJob(t *testing.T, ctx context.Context, cl *client.Client, spec *pipeline.Spec, o client.JobOptions) []int {
	t.Helper()
	it, err := cl.Distribute(ctx, spec, o)
	if err != nil {
		t.Fatalf("job %s: %v", o.Name, err)
	}
	defer it.Close()
	counts := make([]int, 6000)
	readValues(t, ctx, it, counts, 1<<30, nil)
	return counts
}
