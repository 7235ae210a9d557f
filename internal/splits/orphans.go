package splits

import (
	"maps"
	"slices"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
)

// Orphans and fences (exactly-once, exactly.go): a dead worker's splits
// not settled become orphaned, and are leased again, first, once every
// consumer that may hold elements of them has fenced the worker.

// ExpireWorker declares worker dead in an exactly-once job (Expire is the
// at-most-once one): its leased and produced-but-unsettled splits, in
// every epoch, become orphaned, and are leased again once every one of
// consumers (the job's attached consumers: each may hold elements from the
// worker it has not receipted yet) has fenced it. It returns how many
// splits became orphaned.
func (d *DynamicState) ExpireWorker(worker string, consumers []string) (orphaned int) {
	x := d.Exact
	if x == nil {
		return 0
	}
	delete(d.LastLease, worker)
	for e, out := range maps.Clone(d.Outstanding) {
		for s, w := range out {
			if w == worker {
				ranges.Del(d.Outstanding, e, s)
				ranges.Del(x.Lenient, e, s) // the departure it noted took nothing of a re-run
				x.uncensus(e, s)
				ranges.Put(x.Orphaned, e, s, worker)
				orphaned++
			}
		}
	}
	for e, ps := range maps.Clone(x.Produced) {
		for s, p := range ps {
			if p.Worker == worker {
				ranges.Del(x.Produced, e, s)
				ranges.Put(x.Orphaned, e, s, worker)
				if x.Census {
					x.forfeit(e, s, p.Emitted)
				}
				orphaned++
			}
		}
	}
	if orphaned > 0 && len(consumers) > 0 {
		cs := slices.Clone(consumers)
		slices.Sort(cs)
		x.Fences[worker] = slices.Compact(cs)
	} else if len(x.Fences[worker]) == 0 {
		d.settleForfeits(worker) // no consumer may hold more of them
	}
	return orphaned
}

// Fence records that consumer will take nothing more from the expired
// worker, and that its receipts so far cover all it took. The worker's
// orphaned splits are leased again once every consumer it waits for has
// fenced it (or departed). Fencing a worker nobody waits for is a no-op.
func (d *DynamicState) Fence(consumer, worker string) {
	if d.Exact == nil {
		return
	}
	d.unwait(consumer, worker)
}

func (d *DynamicState) unwait(consumer, worker string) {
	x := d.Exact
	cs := x.Fences[worker]
	if i, ok := slices.BinarySearch(cs, consumer); ok {
		cs = slices.Delete(cs, i, i+1)
	}
	if len(cs) == 0 {
		delete(x.Fences, worker)
		d.settleForfeits(worker)
	} else {
		x.Fences[worker] = cs
	}
}

// leaseOrphans hands worker up to n orphaned splits whose fences are all
// in, of the earliest epoch that has any, with their delivered indices as
// exclusions. ok is false when there is none. A local worker gets a
// census only if it runs one (runsCensus: census.go).
func (d *DynamicState) leaseOrphans(worker string, n int, runsCensus bool) (l Lease, ok bool) {
	x := d.Exact
	if _, local := jobspec.LocalWorkerOf(worker); local && x.Census && !runsCensus {
		return Lease{}, false // a census runs on a node, or a local worker that says it runs one (census.go)
	}
	for _, e := range slices.Sorted(maps.Keys(x.Orphaned)) {
		var ids []int64
		for s, dead := range x.Orphaned[e] {
			if len(x.Fences[dead]) == 0 {
				ids = append(ids, s)
			}
		}
		if len(ids) == 0 {
			continue
		}
		slices.Sort(ids)
		ids = ids[:min(len(ids), min(max(n, 1), MaxLease))]
		l = Lease{Epoch: e, Splits: ids, Exclude: make([]ranges.Set, len(ids))}
		for i, s := range ids {
			ranges.Del(x.Orphaned, e, s)
			ranges.Put(d.Outstanding, e, s, worker)
			l.Exclude[i] = x.Delivered[e][s].Clone()
		}
		if x.Census {
			d.leaseCensus(&l)
		} else {
			x.Counts.Requeued += int64(len(ids))
		}
		return l, true
	}
	return Lease{}, false
}
