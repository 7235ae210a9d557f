package fsm

import (
	"maps"
	"slices"
)

// expireConsumersBody is the body of TypeExpireConsumers.
type expireConsumersBody struct {
	// Now is the proposer's clock, Unix nanoseconds.
	Now int64 `cbor:"1,keyasint"`
}

// NewExpireConsumers drops, from every job, the consumers whose lease
// expired before now (Unix nanoseconds, the proposer's clock; the leader
// proposes it periodically). A job left without consumers counts as such
// from its last lease's expiry. Result: map[string][]string, job → dropped
// consumers (sorted), only jobs that lost one.
func NewExpireConsumers(now int64) Command {
	return newCommand(TypeExpireConsumers, 1, expireConsumersBody{Now: now})
}

func applyExpireConsumers(s *State, c Command) (any, error) {
	var b expireConsumersBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	dropped := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(s.Jobs)) {
		j := s.Jobs[name]
		for id, at := range j.Detached {
			if addSat(at, j.Options.ConsumerTTL()) < b.Now {
				delete(j.Detached, id)
			}
		}
		if len(j.Detached) == 0 {
			j.Detached = nil // as a snapshot restores it
		}
		var gone []string
		var last int64
		for _, id := range slices.Sorted(maps.Keys(j.Consumers)) {
			if exp := j.Consumers[id]; exp < b.Now {
				gone = append(gone, id)
				last = max(last, exp)
			}
		}
		if len(gone) == 0 {
			continue
		}
		for _, id := range gone {
			delete(j.Consumers, id)
			delete(j.ConsumerMetrics, id)
			if j.Dynamic != nil {
				j.Dynamic.Depart(id)
			}
			departLocalWorker(j, id)
		}
		if len(j.Consumers) == 0 {
			j.NoConsumersSince = last
		}
		dropped[name] = gone
	}
	return dropped, nil
}
