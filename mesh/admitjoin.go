package mesh

// Bringing admitted members in (admission.go): a member that passed its
// check was refused until then, so memberlist holds it nowhere; a
// push/pull with it (memberlist.Join) brings it in at once, rather than at
// the next periodic one. One push/pull exchanges both nodes' whole member
// lists, and it brings in every member the other side holds alive that
// this node has admitted, not only that one: a node that joins a cluster
// of n admits its n members in a burst, and one push/pull with any of
// them brings in all those admitted so far. So the push/pulls run one at
// a time, each with a member still out, and the members that one brought
// in need none of their own: a newcomer makes a few instead of n, and
// forming n nodes costs n² push/pulls of n members fewer (about half of
// what forming 100 in-process nodes spent in gossip).

// joinSoon queues the admitted member name at gossip for a push/pull.
func (a *admission) joinSoon(name, gossip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ml.Load() == nil || a.n.ctx.Err() != nil || a.n.leaving.Load() {
		return // not gossiping yet, or stopping: the periodic push/pull (or none)
	}
	if len(a.toJoin) >= maxAdmitted {
		return // the periodic push/pull brings it in
	}
	a.toJoin[name] = gossip
	if !a.joining {
		a.joining = true
		a.n.wg.Add(1)
		go a.joinAdmitted()
	}
}

// joinAdmitted makes push/pulls, one at a time, with the queued members
// that are still out, until none is.
func (a *admission) joinAdmitted() {
	defer a.n.wg.Done()
	ml := a.ml.Load()
	for {
		a.mu.Lock()
		if len(a.toJoin) == 0 || a.n.ctx.Err() != nil || a.n.leaving.Load() {
			clear(a.toJoin)
			a.joining = false
			a.mu.Unlock()
			return
		}
		var name, gossip string
		for name, gossip = range a.toJoin {
			break
		}
		delete(a.toJoin, name) // whatever the push/pull does: a failed one leaves it to the periodic ones
		a.mu.Unlock()
		if _, err := ml.Join([]string{gossip}); err != nil {
			a.n.log.Debug("admitted member: push/pull failed; the next periodic one brings it in", "member", name, "err", err)
		}
		in := map[string]bool{}
		for _, m := range ml.Members() {
			in[m.Name] = true
		}
		a.mu.Lock()
		for other := range a.toJoin {
			if in[other] {
				delete(a.toJoin, other)
			}
		}
		a.mu.Unlock()
	}
}
