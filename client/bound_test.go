package client_test

import (
	"testing"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/transport"
)

func TestBufferBound(t *testing.T) {
	const mib = 1 << 20
	tcfg := transport.DefaultConfig() // 16 MiB stream receive window
	for _, tc := range []struct {
		name    string
		o       client.Options
		workers int
		b       int64
		want    int64
	}{
		// Defaults: budget min(256 MiB, (16+1) MiB) + 1 stream × 4 MiB + 1 MiB held.
		{"defaults, 1 worker", client.Options{}, 1, mib, 18*mib + 2*4*mib + mib},
		{"1 stream, 1 worker", client.Options{StreamsPerWorker: 1}, 1, mib, 17*mib + 4*mib + mib},
		{"defaults, 8 workers", client.Options{}, 8, mib, 32*mib + 16*4*mib + mib},
		// The byte budget binds: 64 MiB.
		{"byte budget", client.Options{StreamsPerWorker: 1, PrefetchBatches: 1000, PrefetchBytes: 64 * mib}, 2, mib, 64*mib + 8*mib + mib},
		// Two streams per worker, each with its own window.
		{"streams", client.Options{StreamsPerWorker: 2, Window: 8}, 2, mib, 20*mib + 4*8*mib + mib},
		// 64 batches of 1 MiB credit, but the QUIC window holds 16 MiB (+ the one being decoded).
		{"quic window", client.Options{StreamsPerWorker: 1, Window: 64}, 1, mib, 17*mib + 17*mib + mib},
		// 64 KiB batches: the window grows to WindowBytes (4 MiB) / 64 KiB = 64 batches.
		{"small batches", client.Options{StreamsPerWorker: 1}, 2, 64 << 10, 18*(64<<10) + 2*4*mib + 64<<10},
		// ... unless WindowBytes is turned off.
		{"small batches, fixed window", client.Options{StreamsPerWorker: 1, WindowBytes: -1}, 2, 64 << 10, 18*(64<<10) + 2*4*(64<<10) + 64<<10},
		// 16 KiB batches: 256 would fit in WindowBytes, but the window stops at 64.
		{"tiny batches", client.Options{StreamsPerWorker: 1}, 1, 16 << 10, 17*(16<<10) + 64*(16<<10) + 16<<10},
	} {
		tc.o.Transport = &tcfg
		if got := tc.o.BufferBound(tc.workers, tc.b); got != tc.want {
			t.Errorf("%s: bound %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}
