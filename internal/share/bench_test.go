package share

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkSharedRead measures Read with k jobs reading concurrently, each
// on its own goroutine, from an endless cheap source: the cost of sharing
// itself (lock, cursor, wake-ups). ns/op and allocs/op are per read;
// productions/read shows how much production the sharing saved (1/k is
// ideal).
func BenchmarkSharedRead(b *testing.B) {
	for _, k := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("jobs=%d", k), func(b *testing.B) {
			var produced atomic.Int64
			s := NewShared(DefaultConfig(), func(context.Context) (item, error) {
				return item{seq: produced.Add(1) - 1, size: 4 << 10}, nil
			})
			jobs := jobNames(k)
			for _, j := range jobs {
				if err := s.Join(j); err != nil {
					b.Fatal(err)
				}
			}
			per := (b.N + k - 1) / k
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, job := range jobs {
				wg.Go(func() {
					for range per {
						if _, err := s.Read(ctx, job); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			reads := float64(per * k)
			b.ReportMetric(b.Elapsed().Seconds()*1e9/reads, "ns/read")
			b.ReportMetric(float64(produced.Load())/reads, "productions/read")
			var missed int64
			for _, j := range jobs {
				js, _ := s.JobStats(j)
				missed += js.EvictedBeforeRead
			}
			b.ReportMetric(float64(missed)/reads, "missed/read")
		})
	}
}

// BenchmarkWindowNext measures the pure window: k jobs reading in round
// robin, the first one producing. ns/op is per read.
func BenchmarkWindowNext(b *testing.B) {
	for _, k := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("jobs=%d", k), func(b *testing.B) {
			w := NewWindow[item](DefaultWindowBytes)
			jobs := jobNames(k)
			for _, j := range jobs {
				if err := w.Join(j); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				job := jobs[i%k]
				if _, ok, _, _ := w.Next(job); !ok {
					if _, err := w.Push(item{size: 4 << 10}); err != nil {
						b.Fatal(err)
					}
					w.Next(job)
				}
			}
		})
	}
}
