package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
)

func TestRPCErrorsAndDeadlines(t *testing.T) {
	srv := startNode(t, nodeOpts{})
	cli := startNode(t, nodeOpts{noServer: true})
	srv.rpc.Handle("quorum", func(context.Context, func(any) error) (any, error) {
		return nil, fmt.Errorf("lease splits: %w", Errorf(ErrNoQuorum, "no leader after %s", time.Second))
	})
	srv.rpc.Handle("plain", func(context.Context, func(any) error) (any, error) {
		return nil, errors.New("disk on fire")
	})
	srv.rpc.Handle("panic", func(context.Context, func(any) error) (any, error) {
		panic("bug")
	})
	type addReq struct{ A, B int }
	srv.rpc.Handle("add", func(_ context.Context, decode func(any) error) (any, error) {
		var r addReq
		if err := decode(&r); err != nil {
			return nil, err
		}
		return r.A + r.B, nil
	})
	srv.rpc.Handle("deadline", func(ctx context.Context, _ func(any) error) (any, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, Errorf(ErrInvalid, "no deadline")
		}
		return time.Until(dl).Milliseconds(), nil
	})
	srv.rpc.Handle("slow", func(ctx context.Context, _ func(any) error) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	call := func(method string, req, resp any, d time.Duration) error {
		return Call(testutil.Ctx(t, d), cli.t, cli.codec, srv.addr(), method, req, resp)
	}

	var sum int
	if err := call("add", addReq{2, 3}, &sum, 3*time.Second); err != nil || sum != 5 {
		t.Fatalf("add: %d, %v", sum, err)
	}
	if err := call("echo", "x", nil, 3*time.Second); err != nil {
		t.Fatalf("nil resp: %v", err)
	}
	err := call("quorum", nil, nil, 3*time.Second)
	var we *Error
	if !errors.Is(err, ErrNoQuorum) || errors.Is(err, ErrNoLeader) || !errors.As(err, &we) {
		t.Fatalf("quorum: %v", err)
	}
	if we.Message != "lease splits: no_quorum: no leader after 1s" {
		t.Fatalf("quorum message %q", we.Message)
	}
	if err := call("plain", nil, nil, 3*time.Second); !errors.Is(err, ErrInternal) {
		t.Fatalf("plain: %v", err)
	}
	if err := call("panic", nil, nil, 3*time.Second); !errors.Is(err, ErrInternal) {
		t.Fatalf("panic: %v", err)
	}
	if err := call("nope", nil, nil, 3*time.Second); !errors.Is(err, ErrUnknownMethod) {
		t.Fatalf("unknown: %v", err)
	}
	if err := call("add", "not a struct", &sum, 3*time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad request: %v", err)
	}
	var left int64
	if err := call("deadline", nil, &left, 2*time.Second); err != nil || left <= 0 || left > 2000 {
		t.Fatalf("server-side deadline: %dms left, %v", left, err)
	}
	start := time.Now()
	err = call("slow", nil, nil, 200*time.Millisecond)
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("slow call returned after %s", d)
	}
	// The server keeps serving.
	cli.echo(t, srv.addr())

	// Calls counts each registered method's requests (a bad request too);
	// the unknown "nope" is not counted.
	calls := srv.rpc.Calls()
	for m, want := range map[string]uint64{"add": 2, "quorum": 1, "panic": 1, "slow": 1, "deadline": 1} {
		if calls[m] != want {
			t.Errorf("Calls()[%q] = %d, want %d (all: %v)", m, calls[m], want, calls)
		}
	}
	if _, ok := calls["nope"]; ok {
		t.Errorf("an unknown method is counted: %v", calls)
	}

	// Unreachable peer: unavailable or deadline, never a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	dead := startNode(t, nodeOpts{noServer: true})
	err = Call(ctx, cli.t, cli.codec, dead.addr(), "echo", "x", nil)
	if !errors.Is(err, ErrDeadline) && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("call to a socket with no server: %v", err)
	}
}

func TestRPCConcurrencyBoundAndClose(t *testing.T) {
	cfg := FastConfig()
	cfg.MaxConcurrentRPCs = 2
	srv := startNode(t, nodeOpts{cfg: &cfg})
	cli := startNode(t, nodeOpts{noServer: true})
	var cur, peak atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	srv.rpc.Handle("hold", func(ctx context.Context, _ func(any) error) (any, error) {
		n := cur.Add(1)
		defer cur.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- struct{}{}
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return nil, Errorf(ErrUnavailable, "server closing")
		}
	})
	const calls = 5
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Go(func() {
			errs <- Call(testutil.Ctx(t, 5*time.Second), cli.t, cli.codec, srv.addr(), "hold", nil, nil)
		})
	}
	for range 2 {
		<-started
	}
	select {
	case <-started:
		t.Fatal("a third request started while two were held")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}

	// Close cancels in-flight handlers and waits for them.
	srv.rpc.Handle("block", func(ctx context.Context, _ func(any) error) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	done := make(chan error, 1)
	go func() {
		done <- Call(testutil.Ctx(t, 5*time.Second), cli.t, cli.codec, srv.addr(), "block", nil, nil)
	}()
	<-started
	closed := make(chan struct{})
	go func() { srv.rpc.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("RPCServer.Close did not return")
	}
	if err := <-srv.serve; err != nil {
		t.Fatalf("Serve returned %v after Close", err)
	}
	srv.rpc = nil
	if err := <-done; err == nil {
		t.Fatal("call served by a closed server succeeded")
	}
}

// TestRPCSilentCaller: a control stream that never sends its request is
// answered and closed after the server's read timeout, not held forever.
func TestRPCSilentCaller(t *testing.T) {
	srv := startNode(t, nodeOpts{})
	srv.rpc.SetReadTimeout(200 * time.Millisecond)
	cli := startNode(t, nodeOpts{noServer: true})
	s, err := cli.t.Dial(testutil.Ctx(t, 3*time.Second), srv.addr(), KindControl)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	s.SetReadDeadline(time.Now().Add(3 * time.Second))
	var resp rpcResponse
	if _, err := cli.codec.ReadFrame(s, &resp); err != nil {
		t.Fatalf("no response to a silent caller: %v", err)
	}
	if resp.Code != ErrUnavailable.Code {
		t.Fatalf("response %+v, want %s", resp, ErrUnavailable.Code)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("silent caller held for %s", d)
	}
	cli.echo(t, srv.addr())
}
