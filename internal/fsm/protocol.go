package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// Protocol levels: what a node's state machine writes, so that a cluster
// of mixed releases (a rolling upgrade) keeps applying every entry alike.
// A node advertises the level it speaks (gossip); the cluster's level is
// the least of its Raft servers', and a node writes at that level: the
// commands it proposes and the snapshots it takes.
const (
	// ProtocolLegacy: CreateJob v1..v5 (the options in their legacy
	// form) and snapshot format 2. Nodes of releases before Protocol
	// advertise no level: they are at this one.
	ProtocolLegacy = 1
	// ProtocolJobspec: CreateJob v6 (jobspec's options) and snapshot
	// format 3.
	ProtocolJobspec = 2
	// ProtocolOwners: jobs and datasets record
	// their owner (CreateJob v7, RegisterDataset v2, format 3 snapshots
	// with owners) and unread datasets are garbage-collected
	// (GarbageCollectDataset). Below it, the proposer drops owners
	// (DropOwner, NewRegisterDataset), collects no dataset, and snapshots
	// leave owners out (the older nodes' strict decoding refuses keys they
	// do not know).
	ProtocolOwners = 3
	// This release's level, 4, brings two changes (one release, one
	// level: a node of this release has both):
	//
	// ProtocolLocalCensus: a consumer's local worker that runs a census
	// says so in its lease (LeaseSplits v4, NewLeaseSplitsCensus). Below
	// it, the proposer leases such a worker as before (v3: no census),
	// which older nodes apply alike.
	ProtocolLocalCensus = 4 // api.ProtocolLocalCensus
	// ProtocolQuotas: a tenant's command that adds a job, a dataset or a
	// consumer travels in a Quota command (NewQuota) that every replica
	// checks against the tenant's limits when it applies it. Below it,
	// the proposer sends the command unwrapped (the leader's check alone
	// bounds the tenant).
	ProtocolQuotas = 4
	// ProtocolCapabilities: the cluster keeps a secret (a reserved KV
	// entry) from which data streams' capabilities and checkpoints' MACs
	// derive (mesh/capability.go). Below it, no capability is issued nor
	// required and no MAC checked: a leader of the older release issues
	// none.
	ProtocolCapabilities = 4
	// ProtocolTenantNames: job names are per tenant (mesh/tenantnames.go):
	// a tenant's new job is kept as "@tenant/name", which a worker of an
	// older release, looking the short name up, would not find. Below
	// it, a tenant's new job keeps the name its client gave (names are
	// the cluster's, as that release has them). No command changes.
	ProtocolTenantNames = 4
	// Protocol is this release's level.
	Protocol = 4
)

// legacyOptions is o (with count-loss) in the legacy form that CreateJob
// v1..v5 and snapshot format 2 carry: the inverse of JobOptions.stored.
func legacyOptions(o jobspec.Job, countLoss bool) (JobOptions, error) {
	p, err := splits.ParsePolicy(string(o.Sharding()))
	if err != nil {
		return JobOptions{}, err
	}
	delivery := o.Delivery()
	if delivery == jobspec.AtMostOnce {
		delivery = "" // the legacy form's at-most-once
	}
	compression := o.Compression()
	if compression == "none" {
		compression = ""
	}
	l := JobOptions{
		Sharding: p, Epochs: o.Epochs(), NumConsumers: o.NumConsumers(), Share: o.Share(), Coordinated: o.Coordinated(),
		MaxWorkers: o.MaxWorkers(), ConsumerTTL: o.ConsumerTTL(), GCAfter: o.GCAfter(), PadFinalRound: o.PadFinalRound(),
		Compression: compression, Delivery: delivery, Autoscale: o.Autoscale(),
		AutoscaleThreshold: o.AutoscaleThreshold(), AutoscaleRevisit: o.AutoscaleRevisit(), AutoscalePause: o.AutoscalePause(),
		OffloadBoundary: o.OffloadBoundary(), CountLoss: countLoss,
	}.Normalized()
	back, err := l.stored()
	if err != nil {
		return JobOptions{}, err
	}
	if d := back.Diff(o); len(d) > 0 {
		return JobOptions{}, fmt.Errorf("job options with no legacy form: %v", d)
	}
	return l, nil
}

// DowngradeCreateJob rewrites a CreateJob v6 as the legacy command (v1..v5)
// that creates the same job, for a cluster whose level is ProtocolLegacy
// (a node of an older release among its servers would refuse v6). Any
// other command, or options with no legacy form, is returned as it is,
// with false: the older nodes then refuse it, with the message they have.
func DowngradeCreateJob(c Command) (Command, bool) {
	if c.Type != TypeCreateJob || c.Version < createJobV6 {
		return c, false
	}
	var b createJobBodyV6
	if decodeBody(c, &b) != nil {
		return c, false
	}
	l, err := legacyOptions(b.Options, b.CountLoss)
	if err != nil {
		return c, false
	}
	var d Command
	switch {
	case b.Resume != nil:
		d = LegacyResumeJob(b.Name, b.Fingerprint, l, *b.Resume)
	default:
		d = LegacyCreateJobAt(b.Name, b.Fingerprint, l, b.StaticWorkers, b.Scale)
	}
	d.At = c.At
	return d, true
}

// MarshalSnapshotAt encodes the whole state as a node at protocol level
// protocol writes it: format 3 at Protocol, format 2 at ProtocolLegacy
// (which older nodes restore: a leader may send its snapshot to one).
func (s *State) MarshalSnapshotAt(protocol int) ([]byte, error) {
	if protocol >= ProtocolOwners {
		return s.MarshalSnapshot()
	}
	s = s.withoutOwners()
	if protocol >= ProtocolJobspec {
		return s.MarshalSnapshot()
	}
	jobs := make(map[string]*jobV2, len(s.Jobs))
	for name, j := range s.Jobs {
		l, err := legacyOptions(j.Options, j.CountLoss)
		if err != nil {
			return nil, fmt.Errorf("encode snapshot format 2: job %q: %w", name, err)
		}
		v := &jobV2{Job: *j, Options: l}
		v.Job.CountLoss = false // format 2 keeps it in the options
		jobs[name] = v
	}
	b, err := encMode.Marshal(snapshotV2{Format: 2, KV: s.KV, Index: s.Index, Datasets: s.Datasets, Jobs: jobs})
	if err != nil {
		return nil, fmt.Errorf("encode snapshot format 2: %w", err)
	}
	return b, nil
}

// withoutOwners is s, or if any job or dataset has an owner (or a dataset
// a registration time) or there are tokens, a shallow copy without them:
// what a node below ProtocolOwners restores.
func (s *State) withoutOwners() *State {
	owned := false
	for _, j := range s.Jobs {
		owned = owned || j.Owner != nil
	}
	for _, d := range s.Datasets {
		owned = owned || d.Owner != nil || d.RegisteredAt != 0
	}
	if !owned && len(s.Tokens) == 0 {
		return s
	}
	c := *s
	c.Tokens = nil
	c.Jobs = make(map[string]*Job, len(s.Jobs))
	for name, j := range s.Jobs {
		if j.Owner != nil {
			cj := *j
			cj.Owner = nil
			j = &cj
		}
		c.Jobs[name] = j
	}
	c.Datasets = make(map[string]Dataset, len(s.Datasets))
	for fp, d := range s.Datasets {
		d.Owner, d.RegisteredAt = nil, 0
		c.Datasets[fp] = d
	}
	return &c
}
