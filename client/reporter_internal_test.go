package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
)

// TestReporterEndIsNotAFailure: a report cut short because the iterator
// closes is sent again by the last flush, with its number, and no failure
// is said; a last flush that fails is said.
func TestReporterEndIsNotAFailure(t *testing.T) {
	for _, lastFails := range []bool{false, true} {
		l := newLedger(nil)
		l.fence("w1") // something to report
		var (
			mu    sync.Mutex
			sent  []uint64
			fails []error
		)
		inFlight := make(chan struct{})
		r := &reporter{l: l, job: "j", consumer: "c", interval: time.Hour,
			send: func(ctx context.Context, req api.ReceiptsRequest) error {
				mu.Lock()
				n := len(sent)
				sent = append(sent, req.Seq)
				mu.Unlock()
				if n == 0 { // the first report waits for the end, as a slow leader's answer would
					close(inFlight)
					<-ctx.Done()
					return ctx.Err()
				}
				if lastFails {
					return errors.New("no leader")
				}
				return nil
			},
			onErr: func(err error) { mu.Lock(); fails = append(fails, err); mu.Unlock() },
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); r.run(ctx, func() time.Duration { return time.Second }) }()
		<-inFlight
		cancel()
		<-done
		if len(sent) != 2 || sent[0] != sent[1] {
			t.Fatalf("lastFails=%v: sent reports %v, want the same one twice", lastFails, sent)
		}
		if want := map[bool]int{false: 0, true: 1}[lastFails]; len(fails) != want {
			t.Fatalf("lastFails=%v: failures said %v, want %d", lastFails, fails, want)
		}
	}
}
