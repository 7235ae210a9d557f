package plan

import (
	"slices"
)

// MemberStatus is gossip's verdict on a member.
type MemberStatus uint8

// Member statuses. The zero value is unknown: such a member is neither
// given tasks nor expired.
const (
	MemberAlive MemberStatus = iota + 1
	MemberSuspect
	MemberDead
	MemberLeft
)

// String names the status as gossip does.
func (s MemberStatus) String() string {
	switch s {
	case MemberAlive:
		return "alive"
	case MemberSuspect:
		return "suspect"
	case MemberDead:
		return "dead"
	case MemberLeft:
		return "left"
	}
	return "unknown"
}

// JobMember is gossip's view of one node, the member input of PlanJobs.
type JobMember struct {
	// ID is the node name, the worker id in jobs.
	ID string
	// Addr is its QUIC address; empty until its metadata arrived.
	Addr string
	// Status is gossip's verdict.
	Status MemberStatus
	// Worker: the node runs tasks (false for control-only nodes).
	Worker bool
	// Incarnation is the member's process (its start time, from gossip;
	// 0 if it does not say): a drained worker rejoins its jobs from a
	// newer one.
	Incarnation uint64
}

// assignable: gossip holds it alive (a suspect gets nothing new), it has an
// address to be reached at and it runs tasks.
func (m JobMember) assignable() bool { return m.Status == MemberAlive && m.Addr != "" && m.Worker }

// gone: the member died or left; its tasks are expired.
func (m JobMember) gone() bool { return m.Status == MemberDead || m.Status == MemberLeft }

// AssignableWorkers lists, sorted and without duplicates, the members that
// may be given a task: alive (not suspect), with an address, running tasks.
// At most max of them (0: all), the first by name; a STATIC job is created
// over this list.
func AssignableWorkers(members []JobMember, max int) []string {
	var out []string
	for _, m := range members {
		if m.assignable() {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out
}
