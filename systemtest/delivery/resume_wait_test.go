package delivery

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// lockedBuffer is a log sink safe for the client's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestResumeWaitSaysSoAndFails (issue 42, bug B): a job read twice, one
// consumer after the other (two `read --take --checkpoint` runs within
// gc_after), resumed from the second checkpoint alone, waits for the
// first's. The client says so at once, as a warning (by the time
// Distribute returns), and Next fails after Options.ResumeWait with an
// error that says what the job waits for and what to do, instead of
// blocking for ever.
func TestResumeWaitSaysSoAndFails(t *testing.T) {
	c := testcluster.Start(t, 2)
	spec := func() *pipeline.Spec { return jobtest.ShuffledSpec(2000, 20, 10, 100) }
	opts := client.JobOptions{Name: "resume-wait", Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers}
	cl := jobtest.Dial(t, c, 0)
	a, err := cl.Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	jobtest.ReadUntil(t, a, 20) // its checkpoint is lost (the second run overwrote the file)
	b, err := cl.Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	_, ck := jobtest.ReadUntil(t, b, 20)

	var logs lockedBuffer
	fast := transport.FastConfig()
	const wait = 3 * time.Second
	rc, err := client.Dial(context.Background(), c.Node(1).Addr(), client.Options{Transport: &fast, HeartbeatInterval: 100 * time.Millisecond,
		ResumeWait: wait, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	opts.Resume = ck
	start := time.Now()
	it, err := rc.Distribute(context.Background(), spec(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "waits for the checkpoints") || !strings.Contains(l, "1 of 2") {
		t.Errorf("no warning that the resumed job waits, by the time Distribute returned; the log:\n%s", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = it.Next(ctx)
	took := time.Since(start)
	if !errors.Is(err, client.ErrResumeWait) {
		t.Fatalf("Next after %v: %v; want ErrResumeWait after %v", took, err, wait)
	}
	for _, w := range []string{`job "resume-wait"`, "1 of the 2", "resume each", "new job name", "ResumeWait"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
	if took < wait || took > wait+10*time.Second {
		t.Errorf("Next failed after %v, want about ResumeWait (%v)", took, wait)
	}
	t.Logf("after %v: %v", took, err)
}
