package fsm

import (
	"fmt"
	"maps"
	"slices"
)

// expireWorkerBody is the body of TypeExpireWorker.
type expireWorkerBody struct {
	Worker string `cbor:"1,keyasint"`
	// Superseded (version 2, NewExpireSuperseded): expire the worker only
	// in the jobs where the process that leased last is this incarnation
	// or an older one.
	Superseded uint64 `cbor:"2,keyasint,omitempty"`
}

// NewExpireWorker declares worker dead in every job: it is marked Expired
// and its outstanding DYNAMIC leases are lost, never leased again in their
// epoch. Idempotent. Result: map[string][]int64, job → lost split ids
// (ordered by epoch, then id; possibly empty), for every job in which the
// worker was live.
func NewExpireWorker(worker string) Command {
	return newCommand(TypeExpireWorker, 1, expireWorkerBody{Worker: worker})
}

// NewExpireSuperseded is ExpireWorker (version 2) for a worker whose node
// now runs a newer process than incarnation, the one that leased last in
// its jobs: a restart so quick that gossip never held the node left, so
// nothing expired the old process. Its leases are held by nobody: the
// new process starts a job's task only when a consumer opens a stream to
// it, and a consumer whose streams the old process ended for its drain
// waits for the job to take the worker back (a rejoin, after an expiry
// or a recorded drain). It expires the worker, as ExpireWorker does, in
// each job that takes a worker back (Job.Rejoinable) where the process that
// leased last is incarnation or older (not 0) and still holds splits; the
// leader then plans its rejoin (the newer process). A job where the new
// process has leased already, or the old one held nothing, is left alone.
func NewExpireSuperseded(worker string, incarnation uint64) Command {
	return newCommand(TypeExpireWorker, 2, expireWorkerBody{Worker: worker, Superseded: incarnation})
}

func applyExpireWorker(s *State, c Command) (any, error) {
	var b expireWorkerBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkName("worker id", b.Worker); err != nil {
		return nil, err
	}
	if c.Version < 2 && b.Superseded != 0 {
		return nil, fmt.Errorf("%w: ExpireWorker v1 with an incarnation", ErrInvalidCommand)
	}
	lost := map[string][]int64{}
	for _, name := range slices.Sorted(maps.Keys(s.Jobs)) {
		j := s.Jobs[name]
		st, ok := j.Workers[b.Worker]
		if !ok || st.Expired {
			continue
		}
		if c.Version >= 2 && !j.HoldsSuperseded(b.Worker, b.Superseded) {
			continue
		}
		st.Expired = true
		j.Workers[b.Worker] = st
		if sc := j.Scale; sc != nil && sc.Allocated && !st.Dismissed {
			// The metrics that straddle the worker's replacement say
			// nothing about the count (jobs of a log from before
			// AllocateJob are not allocated and replay as they did).
			*sc = sc.WorkerLost(j.tuneScale(scaleConfigAllocated))
		}
		if j.Rounds != nil {
			j.Rounds.evictWorker(b.Worker)
		}
		lost[name] = expireLeases(j, b.Worker)
	}
	return lost, nil
}
