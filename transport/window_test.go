package transport

import (
	"io"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

// TestWindowBudgetArithmetic: increases are granted while they fit,
// refused past the bound, and a closed connection gives back all it took.
func TestWindowBudgetArithmetic(t *testing.T) {
	b := newWindowBudget(10)
	c1, c2 := new(int), new(int)
	if ok, first := b.take(c1, 4); !ok || !first {
		t.Fatalf("first take: %v %v", ok, first)
	}
	if ok, first := b.take(c1, 4); !ok || first {
		t.Fatalf("second take of the same connection: %v %v", ok, first)
	}
	if ok, _ := b.take(c2, 4); ok {
		t.Fatal("took 12 of 10")
	}
	if ok, _ := b.take(c2, 1<<62); ok {
		t.Fatal("took a huge increase")
	}
	if ok, _ := b.take(c2, 2); !ok || b.inUse() != 10 {
		t.Fatalf("take to the bound: %v, in use %d", ok, b.inUse())
	}
	b.release(c1)
	if b.inUse() != 2 {
		t.Fatalf("after c1 closed: in use %d, want 2", b.inUse())
	}
	b.release(c1) // twice: nothing more
	b.release(c2)
	if b.inUse() != 0 {
		t.Fatalf("after every connection closed: in use %d", b.inUse())
	}
}

// TestReceiveWindowBounded (issue 14, item 6): peers that make a node read
// fast over several connections grow the connections' flow-control windows
// (quic-go's auto-tuning) only within MaxReceiveWindowBytes together, the
// transfers still complete, and the budget comes back when they close.
// Without the bound each connection's window may grow to
// ConnectionReceiveWindow (48 MiB), all of it bufferable unread.
func TestReceiveWindowBounded(t *testing.T) {
	const budget = 3 << 20
	cfg := FastConfig()
	cfg.MaxReceiveWindowBytes = budget
	srv := startNode(t, nodeOpts{cfg: &cfg, noRPC: true})
	const peers, size = 4, 64 << 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*peers)
	for range peers {
		c := startNode(t, nodeOpts{noServer: true})
		s, err := c.t.Dial(testutil.Ctx(t, 5*time.Second), srv.addr(), KindData)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wg.Add(2)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for sent := 0; sent < size; sent += len(buf) {
				if _, err := s.Write(buf); err != nil {
					errs <- err
					return
				}
			}
			s.CloseWrite()
		}()
		in := acceptT(t, srv.t.Listener(KindData))
		go func() {
			defer wg.Done()
			defer in.Close()
			n, err := io.Copy(io.Discard, in) // reads as fast as it can: windows grow
			if err != nil || n != size {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("transfer: %v", err)
	}
	peak := srv.t.windows.peak()
	if peak == 0 || peak > budget {
		t.Fatalf("receive windows grew by %d bytes at most, want (0, %d]", peak, budget)
	}
	t.Logf("%d connections × %d MiB read: windows grew by at most %d KiB together (budget %d KiB)", peers, size>>20, peak>>10, budget>>10)
}
