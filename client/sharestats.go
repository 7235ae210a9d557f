package client

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// ShareStats asks each of the job's workers for the job's sharing counters
// (api.MethodShareStats, answered by the worker itself) and returns their
// sum; Stats().Share is updated with it. Workers that do not answer within
// ctx (or RequestTimeout) are listed in Unreachable. A job without Share
// gets an error.
func (it *Iterator) ShareStats(ctx context.Context) (api.JobShareSummary, error) {
	it.mu.Lock()
	share := it.info.Options.Share
	workers := append([]api.WorkerInfo(nil), it.info.Workers...)
	it.mu.Unlock()
	if !share {
		return api.JobShareSummary{}, errors.New("share stats: the job does not share (JobOptions.Share)")
	}
	sort.Slice(workers, func(i, j int) bool { return workers[i].Name < workers[j].Name })
	var sum api.JobShareSummary
	for _, w := range workers {
		if w.Expired || w.Addr == "" {
			continue
		}
		st, err := it.workerShareStats(ctx, w.Addr)
		if err != nil {
			if err := ctxEnded(ctx); err != nil {
				// Not the worker's fault: do not report it unreachable.
				return api.JobShareSummary{}, err
			}
			sum.Unreachable = append(sum.Unreachable, w.Name)
			continue
		}
		for _, j := range st.Jobs {
			if j.Job == it.job {
				sum.Add(w.Name, j)
			}
		}
	}
	it.mu.Lock()
	cp := sum
	it.stats.Share = &cp
	it.mu.Unlock()
	return sum, nil
}

func (it *Iterator) workerShareStats(ctx context.Context, addr string) (api.WorkerShareStats, error) {
	ctx, cancel := context.WithTimeout(transport.WithToken(ctx, it.c.opts.Token), it.c.opts.RequestTimeout)
	defer cancel()
	var st api.WorkerShareStats
	err := transport.Call(ctx, it.c.tr, it.c.codec, addr, api.MethodShareStats, api.ShareStatsRequest{Job: it.job}, &st)
	return st, err
}

// refreshShareStats keeps Stats().Share current for a sharing job, every
// HeartbeatInterval, until the iterator closes.
func (it *Iterator) refreshShareStats() {
	defer it.wg.Done()
	tick := time.NewTicker(it.c.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-it.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(it.ctx, it.c.opts.HeartbeatInterval)
		if _, err := it.ShareStats(ctx); err != nil && it.ctx.Err() == nil {
			it.c.opts.Logger.Debug("share stats", "job", it.job, "err", err)
		}
		cancel()
	}
}

// ctxEnded is ctx.Err(), and context.DeadlineExceeded once ctx's deadline
// has passed: a stream's deadline timer may fire before ctx's own.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
