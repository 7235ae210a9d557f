package fsm

import (
	"errors"
	"fmt"
)

// Quotas in the state machine (docs/operating/security.md, "Quotas and
// cleanup"). The leader checks a tenant's quotas before it proposes
// (fast, with a clear error), but that check reads one node's memory: a
// leader elected a moment ago, or two leaders of successive terms each
// with requests in flight, could each let a request past it. So a
// tenant's command that adds to the state (a new job, dataset or
// consumer) travels wrapped in a Quota command carrying the limits its
// proposer applies, and every replica checks them against its own state
// when it applies the entry, in log order: the apply is the authority,
// deterministic on every node.
//
// The state keeps nothing new: a tenant's usage is computed from the
// jobs, datasets and consumers it holds (State.TenantUsage), so a
// snapshot restores it as it was, and a limit is the one in the entry,
// not the node's flags at replay time.

// ErrQuota: a Quota command's inner command would take its tenant past
// one of the limits it carries, or into the administrators' reserve.
var ErrQuota = errors.New("fsm: quota exceeded")

// Limits are a tenant's quotas as a proposer applies them (mesh's
// --tenant-max-* flags and --admin-reserve). A zero field is a limit of
// zero, not "no limit": the proposer always sends its own.
type Limits struct {
	MaxJobs      int   `cbor:"1,keyasint"`
	MaxDatasets  int   `cbor:"2,keyasint"`
	MaxConsumers int   `cbor:"3,keyasint"`
	MaxSpecBytes int64 `cbor:"4,keyasint"`
	// AdminReserve is how many of the state's MaxJobs jobs and
	// MaxDatasets datasets only administrators may take.
	AdminReserve int `cbor:"5,keyasint"`
}

// Growth is what a command adds to a tenant's share of the state.
type Growth struct {
	Job, Dataset, Consumer bool
	SpecBytes              int // of a new dataset
}

// Exceeded says why g would take a tenant holding u past l (or into the
// administrators' reserve), naming the limit's flag; "" if it would not.
// Pure: both the leader's check and the apply use it.
func (l Limits) Exceeded(u Usage, g Growth) string {
	if g.Job {
		switch {
		case u.Jobs >= l.MaxJobs:
			return fmt.Sprintf("%d jobs, its limit (--tenant-max-jobs %d): stop one, or wait for a finished one's gc_after", u.Jobs, l.MaxJobs)
		case u.AllJobs >= MaxJobs-l.AdminReserve:
			return fmt.Sprintf("the cluster holds %d jobs; the last %d of its %d are kept for administrators (--admin-reserve)", u.AllJobs, l.AdminReserve, MaxJobs)
		}
	}
	if g.Consumer && u.Consumers >= l.MaxConsumers {
		return fmt.Sprintf("%d consumers attached to its jobs, its limit (--tenant-max-consumers %d): stop one", u.Consumers, l.MaxConsumers)
	}
	if g.Dataset {
		switch {
		case u.Datasets >= l.MaxDatasets:
			return fmt.Sprintf("%d datasets, its limit (--tenant-max-datasets %d): datasets no job reads are removed after --dataset-gc-after", u.Datasets, l.MaxDatasets)
		case u.SpecBytes+int64(g.SpecBytes) > l.MaxSpecBytes:
			return fmt.Sprintf("its datasets' specs take %d bytes, and this one %d more: over its limit (--tenant-max-state-bytes %d)", u.SpecBytes, g.SpecBytes, l.MaxSpecBytes)
		case u.AllDatasets >= MaxDatasets-l.AdminReserve:
			return fmt.Sprintf("the cluster holds %d datasets; the last %d of its %d are kept for administrators (--admin-reserve)", u.AllDatasets, l.AdminReserve, MaxDatasets)
		}
	}
	return ""
}

// quotaBody is the body of TypeQuota.
type quotaBody struct {
	Limits  Limits  `cbor:"1,keyasint"`
	Command Command `cbor:"2,keyasint"`
}

// NewQuota wraps inner (a RegisterDataset v2, a CreateJob v7 or later, or
// an AttachConsumer) in the limits of the tenant it is for: the apply
// refuses it with ErrQuota, changing nothing, if what inner adds would
// take the tenant past l; else it applies inner, with the wrapper's At,
// and its result is inner's. The tenant is the one inner names: the
// owner of a new dataset or job, the tenant of the job a consumer
// attaches to. Commands of administrators and nodes are not wrapped. A
// node below protocol level ProtocolQuotas refuses it (an unknown command
// type): the proposer wraps only at that level.
func NewQuota(l Limits, inner Command) Command {
	at := inner.At
	inner.At = 0 // the wrapper's, given to inner when applied
	c := newCommand(TypeQuota, 1, quotaBody{Limits: l, Command: inner})
	c.At = at
	return c
}

// handlerOf is commandTable's row of t (set in init: commandTable
// holds applyQuota, which looks its inner command up there).
var handlerOf func(t CommandType) (handler, bool)

func init() {
	handlerOf = func(t CommandType) (handler, bool) { h, ok := commandTable[t]; return h, ok }
}

func applyQuota(s *State, c Command) (any, error) {
	var b quotaBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	inner := b.Command
	if inner.At != 0 {
		return nil, fmt.Errorf("%w: a Quota's command takes its time from the Quota", ErrInvalidCommand)
	}
	h, ok := handlerOf(inner.Type)
	if !ok || inner.Type == TypeQuota {
		return nil, fmt.Errorf("%w: Quota of command type %d", ErrInvalidCommand, uint16(inner.Type))
	}
	if inner.Version < h.minVersion || inner.Version > h.maxVersion {
		return nil, fmt.Errorf("%w: %s v%d (this node knows v%d..v%d)", ErrUnknownVersion, h.name, inner.Version, h.minVersion, h.maxVersion)
	}
	tenant, g, err := s.growthOf(inner)
	if err != nil {
		return nil, err
	}
	// What adds nothing (a heartbeat renewing its consumer's lease, the
	// common case) needs no count: TenantUsage walks every job and
	// dataset.
	if g == (Growth{}) {
		inner.At = c.At
		return h.apply(s, inner)
	}
	if why := b.Limits.Exceeded(s.usageFor(tenant, g), g); why != "" {
		name := tenant
		if name == "" {
			name = "(default)"
		}
		return nil, fmt.Errorf("%w: tenant %s: %s", ErrQuota, name, why)
	}
	inner.At = c.At
	return h.apply(s, inner)
}

// growthOf is the tenant inner is for and what it would add to the
// tenant's share of s. A command that would fail anyway (an unknown job)
// adds nothing: its own apply refuses it.
func (s *State) growthOf(inner Command) (tenant string, g Growth, err error) {
	switch inner.Type {
	case TypeRegisterDataset:
		var b registerDatasetBody
		if err := decodeBody(inner, &b); err != nil {
			return "", g, err
		}
		if b.Owner == nil {
			return "", g, fmt.Errorf("%w: a Quota's RegisterDataset must carry its owner (v2)", ErrInvalidCommand)
		}
		if _, ok := s.Datasets[b.Dataset.Fingerprint]; !ok {
			g = Growth{Dataset: true, SpecBytes: len(b.Dataset.Spec)}
		}
		return b.Owner.Tenant, g, nil
	case TypeCreateJob:
		b, err := decodeCreateJob(inner)
		if err != nil {
			return "", g, err
		}
		if b.Owner == nil {
			return "", g, fmt.Errorf("%w: a Quota's CreateJob must carry its owner (v7)", ErrInvalidCommand)
		}
		_, exists := s.Jobs[b.Name]
		return b.Owner.Tenant, Growth{Job: !exists}, nil
	case TypeAttachConsumer:
		var b consumerBody
		if err := decodeBody(inner, &b); err != nil {
			return "", g, err
		}
		j, ok := s.Jobs[b.Job]
		if !ok || j.Group {
			return "", g, nil
		}
		_, attached := j.Consumers[b.Consumer]
		return TenantOf(j.Owner), Growth{Consumer: !attached}, nil
	}
	return "", g, fmt.Errorf("%w: Quota of a %v command (RegisterDataset, CreateJob or AttachConsumer only)", ErrInvalidCommand, inner.Type)
}

// usageFor is TenantUsage cut to what g is checked against: a job or a
// consumer walks the jobs only, a dataset the datasets only.
func (s *State) usageFor(tenant string, g Growth) Usage {
	u := Usage{AllJobs: len(s.Jobs), AllDatasets: len(s.Datasets)}
	if g.Job || g.Consumer {
		for _, j := range s.Jobs {
			if !j.Group && TenantOf(j.Owner) == tenant {
				u.Jobs++
				u.Consumers += len(j.Consumers)
			}
		}
	}
	if g.Dataset {
		for fp := range s.Datasets {
			if d := s.Datasets[fp]; TenantOf(d.Owner) == tenant {
				u.Datasets++
				u.SpecBytes += int64(len(d.Spec))
			}
		}
	}
	return u
}
