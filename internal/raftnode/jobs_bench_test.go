package raftnode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// BenchmarkLeaseSplits measures DYNAMIC split leasing with n=16 splits per
// lease: through a real 3-voter raft cluster (raft-boltdb with fsync, TCP
// loopback; 32 workers, each leasing and then finishing its splits, one
// command at a time), and against an in-memory splits.DynamicState doing
// the same in the same run. Both report splits/s handed out.
//
//	go test -run XXX -bench LeaseSplits -benchtime 3s ./internal/raftnode/
func BenchmarkLeaseSplits(b *testing.B) {
	const perLease = 16
	b.Run("raft-3-voters", func(b *testing.B) {
		nodes := startCluster(b, 3)
		leader := waitLeader(b, nodes)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const workers = 32
		setup := []fsm.Command{
			fsm.NewRegisterDataset(fsm.Dataset{Fingerprint: "fp", Spec: []byte("spec"), NumSplits: splits.MaxSplits}),
			fsm.LegacyCreateJob("j", "fp", fsm.JobOptions{Sharding: splits.Dynamic}, nil),
		}
		for w := range workers {
			setup = append(setup, fsm.NewAssignTask("j", fmt.Sprint("w", w)))
		}
		for _, c := range setup {
			if _, err := leader.Apply(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		var handed atomic.Int64
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				worker := fmt.Sprint("w", w)
				for req := uint64(1); next.Add(1) <= int64(b.N); req++ {
					res, err := leader.Apply(ctx, fsm.NewLeaseSplits("j", worker, req, perLease))
					if err != nil {
						b.Error(err)
						return
					}
					l := res.Value.(splits.Lease)
					handed.Add(int64(len(l.Splits)))
					if _, err := leader.Apply(ctx, fsm.NewFinishSplits("j", worker, l.Epoch, l.Splits)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(handed.Load())/elapsed.Seconds(), "splits/s")
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "leases/s")
	})
	b.Run("in-memory", func(b *testing.B) {
		d := splits.NewDynamic(splits.MaxSplits, 1)
		var handed int64
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			l := d.Lease("w", uint64(i+1), perLease)
			handed += int64(len(l.Splits))
			if err := d.Finish("w", l.Epoch, l.Splits); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(handed)/elapsed.Seconds(), "splits/s")
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "leases/s")
	})
}
