package mesh

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// shareStatsTimeout bounds how long `feedmesh jobs` waits for a worker's
// sharing counters; a worker that does not answer is listed as
// unreachable instead of holding up the listing.
const shareStatsTimeout = 2 * time.Second

// addShareSummaries asks the workers of the sharing jobs in infos for their
// counters (one request per worker, concurrently) and sums them per job.
// It runs on the leader; jobs without Share cost nothing.
func (n *Node) addShareSummaries(ctx context.Context, infos []api.JobInfo) {
	addrs := map[string]string{}
	for _, j := range infos {
		if !j.Options.Share {
			continue
		}
		for _, w := range j.Workers {
			if !w.Expired {
				addrs[w.Name] = w.Addr
			}
		}
	}
	if len(addrs) == 0 {
		return
	}
	var mu sync.Mutex
	got := map[string]api.WorkerShareStats{}
	var wg sync.WaitGroup
	for name, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := n.workerShareStats(ctx, name, addr, "")
			if err != nil {
				n.log.Debug("share stats", "worker", name, "err", err)
				return
			}
			mu.Lock()
			got[name] = st
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i := range infos {
		j := &infos[i]
		if !j.Options.Share {
			continue
		}
		sum := &api.JobShareSummary{}
		for _, w := range j.Workers {
			if w.Expired {
				continue
			}
			st, ok := got[w.Name]
			if !ok {
				sum.Unreachable = append(sum.Unreachable, w.Name)
				continue
			}
			k := sort.Search(len(st.Jobs), func(k int) bool { return st.Jobs[k].Job >= j.Name })
			if k < len(st.Jobs) && st.Jobs[k].Job == j.Name {
				sum.Add(w.Name, st.Jobs[k])
			}
		}
		j.Share = sum
	}
}

// workerShareStats asks one worker (this node directly) for its counters.
func (n *Node) workerShareStats(ctx context.Context, name, addr, job string) (api.WorkerShareStats, error) {
	if name == n.name {
		return n.ShareStats(job), nil
	}
	if addr == "" {
		return api.WorkerShareStats{}, transport.Errorf(transport.ErrUnavailable, "no address for worker %s", name)
	}
	ctx, cancel := context.WithTimeout(ctx, shareStatsTimeout)
	defer cancel()
	var st api.WorkerShareStats
	err := transport.Call(ctx, n.tr, n.codec, addr, api.MethodShareStats, api.ShareStatsRequest{Job: job}, &st)
	return st, err
}
