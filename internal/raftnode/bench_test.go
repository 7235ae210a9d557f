package raftnode

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// BenchmarkApply3Voters: 64 concurrent Apply calls against a 3-voter
// cluster with raft-boltdb fsync on disk; reports applies/s and latency
// percentiles. Run with: go test -run XXX -bench Apply3 ./internal/raftnode/
func BenchmarkApply3Voters(b *testing.B) {
	nodes := startCluster(b, 3)
	leader := waitLeader(b, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		i := 0
		for pb.Next() {
			t0 := time.Now()
			if _, err := leader.Apply(ctx, fsm.NewPutKV(fmt.Sprint(i%1000), []byte("value"))); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
			i++
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "applies/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkFailover measures how long a 3-voter FastConfig cluster takes to
// agree on a new leader after its leader is killed (Close).
func BenchmarkFailover(b *testing.B) {
	var total time.Duration
	var all []time.Duration
	for range b.N {
		nodes := startCluster(b, 3)
		leader := waitLeader(b, nodes)
		t0 := time.Now()
		_ = leader.Close()
		rest := slices.DeleteFunc(slices.Clone(nodes), func(n *testNode) bool { return n == leader })
		waitLeader(b, rest)
		d := time.Since(t0)
		total += d
		all = append(all, d)
		for _, n := range nodes {
			_ = n.Close()
		}
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "mean-ms")
}
