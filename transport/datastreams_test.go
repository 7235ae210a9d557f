package transport

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

// Data-stream limits: 1,000 connections, each opening a data stream, arrive
// at one node whose data listener serves every stream it accepts with a
// goroutine and a 64 KiB buffer (as a worker serves a consumer with a
// goroutine and a batch sender). Without a bound the node serves all of
// them; with MaxDataStreams and MaxDataStreamsPerAddr it serves at most
// those, the others get ErrStreamRefused, and the streams it serves keep
// working.

// floodConns is how many connections the flood opens.
const floodConns = 1000

// echoData serves srv's data streams, each with its own goroutine echoing
// through a 64 KiB buffer until the peer closes. The goroutines end when the
// transport closes; the test's cleanup waits for them. It returns the peak
// number of streams served at once.
func echoData(t *testing.T, srv *node) *atomic.Int64 {
	var (
		wg         sync.WaitGroup
		live, peak atomic.Int64
	)
	l := srv.t.Listener(KindData)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				n := live.Add(1)
				defer live.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				_, _ = io.CopyBuffer(c, c, make([]byte, 64<<10))
			})
		}
	})
	t.Cleanup(func() {
		srv.stop() // ends Accept and every stream
		wg.Wait()
	})
	return &peak
}

// ping writes to s and reads the echo back; it returns the error of either.
func ping(s *Stream) error {
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	defer s.SetDeadline(time.Time{})
	if _, err := s.Write([]byte("ping")); err != nil {
		return err
	}
	var b [4]byte
	if _, err := io.ReadFull(s, b[:]); err != nil {
		return err
	}
	if string(b[:]) != "ping" {
		return errors.New("echo mismatch: " + string(b[:]))
	}
	return nil
}

// floodResult is what one flood measured.
type floodResult struct {
	served, refused int
	peak            int64 // most streams the node's handlers served at once
	goroutines      int   // goroutines added while the flood's streams are open
	heap            int64 // heap in use added, bytes
	streams         []*Stream
}

// dataFlood opens floodConns connections from cli to srv, one data stream on
// each, and pings every stream; refused streams must fail with
// ErrStreamRefused, others must echo.
func dataFlood(t *testing.T, cli, srv *node, peak *atomic.Int64) floodResult {
	g0, h0 := runtime.NumGoroutine(), heapInuse()
	var r floodResult
	for range floodConns {
		ctx := testutil.Ctx(t, 5*time.Second)
		c, err := cli.t.dial(ctx, srv.addr())
		if err != nil {
			t.Fatalf("connection %d: %v", r.served+r.refused, err)
		}
		t.Cleanup(func() { _ = c.CloseWithError(0, "") })
		qs, err := c.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := newStream(cli.t, c, qs, connKey{})
		if _, err := s.Write([]byte{byte(KindData)}); err != nil {
			t.Fatal(err)
		}
		switch err := ping(s); {
		case err == nil:
			r.served++
			r.streams = append(r.streams, s)
		case errors.Is(err, ErrStreamRefused):
			r.refused++
			s.Close()
		default:
			t.Fatalf("stream %d: %v, want an echo or ErrStreamRefused", r.served+r.refused, err)
		}
	}
	r.peak = peak.Load()
	r.goroutines = runtime.NumGoroutine() - g0
	r.heap = int64(heapInuse()) - int64(h0)
	return r
}

// floodConfig admits the flood's connections and bounds data streams as
// given.
func floodConfig(maxData, maxPerAddr int) Config {
	cfg := FastConfig()
	cfg.MaxIncomingConns = floodConns + 64
	cfg.MaxConnsPerAddr = floodConns + 32
	cfg.MaxDataStreams = maxData
	cfg.MaxDataStreamsPerAddr = maxPerAddr
	return cfg
}

// flood runs dataFlood against a new node with cfg.
func flood(t *testing.T, cfg Config) (floodResult, *node) {
	srv := startNode(t, nodeOpts{cfg: &cfg, noRPC: true})
	peak := echoData(t, srv)
	cli := startNode(t, nodeOpts{noServer: true})
	r := dataFlood(t, cli, srv, peak)
	t.Logf("limits %d, %d per address: served %d (at once: %d), refused %d; +%d goroutines, heap +%.1f MiB",
		cfg.MaxDataStreams, cfg.MaxDataStreamsPerAddr, r.served, r.peak, r.refused, r.goroutines, float64(r.heap)/(1<<20))
	return r, srv
}

// TestDataStreamsBounded: with limits too large to bind (as before they
// existed) the node serves all of the flood's streams, a handler goroutine
// and buffer each. With MaxDataStreams = 128 and MaxDataStreamsPerAddr = 96,
// 96 of the flood are served, the rest refused with ErrStreamRefused
// (counted), and the heap grows by less; a member at another address gets
// what is left of MaxDataStreams and then is refused; the served streams
// keep working; closing streams gives their places back.
func TestDataStreamsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 QUIC connections")
	}
	var free floodResult
	t.Run("unbounded", func(t *testing.T) { // its nodes close when it ends
		free, _ = flood(t, floodConfig(1<<30, 1<<30))
		if free.served != floodConns || free.peak != floodConns {
			t.Fatalf("served %d (%d at once), want all %d", free.served, free.peak, floodConns)
		}
	})
	const maxData, perAddr = 128, 96
	r, srv := flood(t, floodConfig(maxData, perAddr))
	if r.served != perAddr || r.refused != floodConns-perAddr || r.peak != perAddr {
		t.Fatalf("served %d (%d at once), refused %d; want %d, %d", r.served, r.peak, r.refused, perAddr, floodConns-perAddr)
	}
	// 904 fewer streams served hold 904 fewer 64 KiB buffers and goroutines.
	if saved := free.heap - r.heap; saved < (floodConns-perAddr)*64<<10/2 {
		t.Errorf("heap grew by %d B bounded, %d B unbounded: want the bound to save half of the refused streams' buffers at least", r.heap, free.heap)
	}
	if got := srv.t.Refusals().DataStreams; got != int64(r.refused) {
		t.Errorf("Refusals().DataStreams = %d, want %d", got, r.refused)
	}

	// A member at another address gets the rest of MaxDataStreams.
	member := startNode(t, nodeOpts{noServer: true, addr: "127.0.0.2:0"})
	var mine []*Stream
	ctx := testutil.Ctx(t, 10*time.Second)
	for i := range maxData - perAddr + 1 {
		s, err := member.t.Dial(ctx, srv.addr(), KindData)
		if err != nil {
			t.Fatal(err)
		}
		err = ping(s)
		if i < maxData-perAddr {
			if err != nil {
				t.Fatalf("member's stream %d: %v", i, err)
			}
			mine = append(mine, s)
			continue
		}
		if !errors.Is(err, ErrStreamRefused) {
			t.Fatalf("member's stream over MaxDataStreams: %v, want ErrStreamRefused", err)
		}
		t.Logf("refused: %v", err)
		s.Close()
	}
	if got := srv.t.DataStreams(); got != maxData {
		t.Errorf("DataStreams() = %d, want %d", got, maxData)
	}

	// The served streams keep working.
	for i, s := range append(r.streams, mine...) {
		if err := ping(s); err != nil {
			t.Fatalf("served stream %d after the refusals: %v", i, err)
		}
	}

	// Closing streams gives their places back.
	for _, s := range r.streams[:10] {
		s.Close()
	}
	testutil.WaitFor(t, 5*time.Second, "10 closed data streams given back", func() bool { return srv.t.DataStreams() == maxData-10 })
	s, err := member.t.Dial(ctx, srv.addr(), KindData)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := ping(s); err != nil {
		t.Fatalf("member's stream after 10 closed: %v", err)
	}
}
