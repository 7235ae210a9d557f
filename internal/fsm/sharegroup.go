package fsm

import (
	"fmt"
	"strings"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// Share groups: how DYNAMIC jobs with Share lease splits once for all of
// them.
//
// Ephemeral sharing runs one production per (worker, dataset) for every
// sharing job of that dataset. Under DYNAMIC sharding that production must
// lease splits once, not once per job, and every worker's production must
// lease from the same bookkeeping, or two workers would both produce the
// whole dataset. Leasing under one of the jobs' names would tie the
// bookkeeping to that job: when it is garbage-collected while others still
// read, its leases vanish with it. So the state holds a share group: a hidden
// job (Group set, named shareGroupPrefix + the log index that created it)
// with the DYNAMIC bookkeeping of (dataset, epochs). Sharing jobs name it in
// Job.ShareGroup, and workers lease, finish and are expired in it exactly as
// in any job:
//
//   - CreateJob of a DYNAMIC job with Share joins the newest group of the
//     same dataset and epoch count whose splits are not all handed out, or
//     creates one (a later sweep over a finished dataset starts afresh).
//   - AssignTask of a worker to a sharing job assigns it to the group too,
//     so the worker may lease there; ExpireWorker expires it in the group
//     like in every job, losing its outstanding leases (at-most-once). A
//     worker expired from the group is out of it for good, like out of a
//     job (NewAssignTask): assigned to another job of the group, it stays
//     expired in the group, so it leases nothing that the group's older
//     jobs, which dropped it, would never read.
//   - The group has no consumers. It is collected with the last job that
//     references it; GarbageCollectJob of a group still referenced is
//     rejected (ErrJobInUse).

// shareGroupPrefix starts every share group's name; job names may not.
const shareGroupPrefix = "share~"

// findShareGroup returns the newest share group of dataset fp and epochs
// whose splits are not all handed out yet, or "" if there is none.
func (s *State) findShareGroup(fp string, epochs int64) string {
	var best *Job
	for _, g := range s.Jobs {
		if !g.Group || g.Fingerprint != fp || g.Options.Epochs() != epochs || g.Dynamic == nil {
			continue
		}
		if g.Dynamic.Progress().Done {
			continue
		}
		if best == nil || g.ID > best.ID {
			best = g // the newest: deterministic whatever the map order
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// newShareGroup adds a share group for sharing jobs of ds that make
// epochs passes, and returns its name. The caller has checked that there
// is room.
func (s *State) newShareGroup(ds Dataset, epochs int64, at int64) (string, error) {
	o, err := shareGroupOptions(epochs)
	if err != nil {
		return "", err
	}
	g := &Job{
		ID: s.applying, Name: fmt.Sprintf("%s%d", shareGroupPrefix, s.applying), Fingerprint: ds.Fingerprint,
		NumSplits: ds.NumSplits, CreatedAt: at, NoConsumersSince: at, Group: true, Options: o,
		Consumers: map[string]int64{}, Workers: map[string]WorkerState{},
		Dynamic: splits.NewDynamic(ds.NumSplits, max(epochs, 0)),
	}
	s.Jobs[g.Name] = g
	return g.Name, nil
}

// shareGroupOptions are a share group's options: DYNAMIC at-most-once,
// sharing, of its jobs' epochs, with the state machine's default lease
// and lifetime (a group has no consumers, and lives while a job reads it).
func shareGroupOptions(epochs int64) (jobspec.Job, error) {
	o, err := jobspec.StoredJob(jobspec.Options{Sharding: jobspec.Dynamic, Epochs: epochs, Share: true, Delivery: jobspec.AtMostOnce,
		Workers: jobspec.AllWorkers, ConsumerTTL: defaultConsumerTTL, GCAfter: DefaultGCAfter})
	if err != nil {
		return jobspec.Job{}, fmt.Errorf("%w: share group of %d epochs: %v", ErrInvalidCommand, epochs, err)
	}
	return o, nil
}

// assignShareGroup assigns worker to j's share group, if j has one; the
// group accepts every worker its jobs accept, except, with final (AssignTask
// v2), one expired from the group: that worker is out of the group for good,
// as out of a job (NewAssignTask), since every job of the group has dropped
// it. It then cannot lease for j either, and its part of j ends at once.
func (s *State) assignShareGroup(j *Job, worker string, at int64, final bool) {
	g, ok := s.Jobs[j.ShareGroup]
	if j.ShareGroup == "" || !ok {
		return
	}
	if st, known := g.Workers[worker]; known && (!st.Expired || final) {
		return
	}
	if _, known := g.Workers[worker]; !known && len(g.Workers) >= maxJobWorkers {
		return // the job's own bound was checked; the group's is the same
	}
	g.Workers[worker] = WorkerState{Since: at}
}

// groupReferenced reports whether a job reads share group g.
func (s *State) groupReferenced(g string) bool {
	for _, j := range s.Jobs {
		if j.ShareGroup == g {
			return true
		}
	}
	return false
}

// IsShareGroupName reports whether name is a share group's (the prefix
// job names may not take): the cluster's, no tenant's.
func IsShareGroupName(name string) bool { return strings.HasPrefix(name, shareGroupPrefix) }
