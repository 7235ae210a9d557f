package fsm

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// compatDriver builds a random but plausible log: each command is chosen
// from what the state holds (its jobs, the last lease of each worker), so
// that most commands apply and the jobs get far (expiries, orphans,
// fences, censuses, resumes, autoscaling, allocation, offload, rounds).
type compatDriver struct {
	r      *rand.Rand
	s      *State
	now    int64
	leases map[string]splits.Lease // job/worker → its last lease
	inc    map[string]uint64       // worker → incarnation
	seq    map[string]uint64       // job/consumer → report number
	batch  map[string]int64        // job/consumer → batches received
	// v6: the log's part after compatLegacyEntries, whose jobs are
	// created as the nodes create them since: CreateJob v6.
	v6 bool
	// owners: the part after compatV6Entries, whose jobs mostly have an
	// owner of one of two tenants (CreateJob v7).
	owners bool
}

var compatOptions = []JobOptions{
	{Sharding: splits.Dynamic, Epochs: 1},
	{Sharding: splits.Dynamic, Epochs: 2, Delivery: DeliveryExactlyOnce},
	{Sharding: splits.Dynamic, Epochs: 1, CountLoss: true},
	{Sharding: splits.Dynamic, Epochs: -1, Autoscale: true, MaxWorkers: 3},
	{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce, OffloadBoundary: 2},
	{Sharding: splits.Dynamic, Epochs: 1, Share: true},
	{Sharding: splits.Dynamic, Epochs: 1, Coordinated: true, NumConsumers: 2, PadFinalRound: true},
	{Sharding: splits.Static, Epochs: 1, MaxWorkers: 2},
	{Sharding: splits.Off, Epochs: 1, Compression: "lz4"},
	{Sharding: splits.Dynamic, Epochs: 1, Autoscale: true, AutoscaleThreshold: 0.05, AutoscaleRevisit: 3, AutoscalePause: -1},
	{Sharding: splits.Dynamic, Epochs: 1, Delivery: DeliveryExactlyOnce},
}

// compatRequests are options as consumers ask for them, normalized as a
// node does (jobspec's defaults: DYNAMIC is exactly-once), for the v6
// part of the log. The first was recorded when DYNAMIC jobs autoscaled by
// default; it asks for auto since the default became all (issue 42).
var compatRequests = []jobspec.Options{
	{Sharding: jobspec.Dynamic, Workers: jobspec.AutoWorkers},
	{Sharding: jobspec.Dynamic, Delivery: jobspec.AtMostOnce, Workers: jobspec.FixedWorkers(2)},
	{Sharding: jobspec.Dynamic, Epochs: 2, OffloadBoundary: 2, MaxWorkers: 3, Workers: jobspec.AutoWorkers},
	{Sharding: jobspec.Dynamic, Share: true},
	{Coordinated: true, NumConsumers: 2},
	{Sharding: jobspec.Off, Compression: "zstd"},
	{Sharding: jobspec.Static, Workers: "2"},
}

// compatCreate is a job's Create as the v6 part proposes it: the legacy
// options o converted (the kinds the recording has had since the
// start), or a consumer's request normalized.
func compatCreate(name, fp string, o JobOptions) Create {
	job, err := o.Normalized().stored()
	if err != nil {
		panic(fmt.Sprintf("compat option %+v: %v", o, err)) // the fixed table is valid
	}
	return Create{Name: name, Fingerprint: fp, Options: job, CountLoss: o.CountLoss}
}

func compatRequest(name, fp string, o jobspec.Options) Create {
	o.Name = name
	n, err := o.Normalize()
	if err != nil {
		panic(fmt.Sprintf("compat request %+v: %v", o, err)) // the fixed table is valid
	}
	// As mesh does: an at-most-once DYNAMIC job without share or
	// coordinated reads counts its loss.
	j := n.Job()
	count := j.Delivery() == jobspec.AtMostOnce && j.Sharding() == jobspec.Dynamic && !j.Share() && !j.Coordinated()
	return Create{Name: name, Fingerprint: fp, Options: j, CountLoss: count}
}

func (d *compatDriver) pick(prefix string, n int) string {
	return fmt.Sprintf("%s%d", prefix, d.r.IntN(n))
}

func (d *compatDriver) jobID(job string) uint64 {
	if j, ok := d.s.Jobs[job]; ok && d.r.IntN(12) > 0 {
		return j.ID
	}
	return uint64(d.r.IntN(5))
}

// next returns the next command, stamped.
func (d *compatDriver) next() Command {
	d.now += d.r.Int64N(int64(800 * time.Millisecond))
	c := d.choose()
	c.At = d.now
	return c
}

// choose picks a command for a job: mostly one that fits what the job
// is (so that leases, receipts and expiries find something to act on),
// now and then any command at all (so that refusals are recorded too).
func (d *compatDriver) choose() Command {
	job := d.pick("j", 4)
	j, ok := d.s.Jobs[job]
	switch {
	case d.r.IntN(8) == 0:
		return d.any(job)
	case !ok && d.r.IntN(4) > 0:
		return d.create(job)
	case !ok:
		return d.any(job)
	case j.Dynamic != nil:
		return d.dynamic(job, j)
	}
	return d.fixed(job)
}

func (d *compatDriver) create(job string) Command {
	if d.v6 {
		return d.createV6(job)
	}
	r := d.r
	if r.IntN(8) == 0 {
		o := JobOptions{Sharding: splits.Dynamic, Epochs: 2, Delivery: DeliveryExactlyOnce, ConsumerTTL: 5 * time.Second, GCAfter: 10 * time.Second}
		var p ranges.Delivered
		if r.IntN(2) == 0 {
			p.Returned = map[int64]map[int64]ranges.Set{0: {int64(r.IntN(6)): ranges.Span(0, 2)}}
		}
		return LegacyResumeJob(job, "fp0", o, ResumeBody{From: d.jobID(job), Part: d.pick("c", 3), Want: 1 + r.IntN(2), Delivered: p})
	}
	o := compatOptions[r.IntN(len(compatOptions))]
	o.ConsumerTTL, o.GCAfter = 5*time.Second, 10*time.Second
	fp := d.pick("fp", 2)
	if o.Sharding == splits.Static {
		return LegacyCreateJob(job, fp, o, []string{d.pick("w", 5), d.pick("w", 5), d.pick("w", 5)})
	}
	if o.Autoscale && r.IntN(2) == 0 {
		return LegacyCreateJobAt(job, fp, o, nil, &ScaleStart{Workers: 1 + r.IntN(4), From: d.pick("j", 4)})
	}
	return LegacyCreateJob(job, fp, o, nil)
}

// createV6 is create for the v6 part: CreateJob v6, from the legacy
// kinds converted or from consumers' requests normalized.
func (d *compatDriver) createV6(job string) Command {
	r := d.r
	fp := d.pick("fp", 2)
	if r.IntN(8) == 0 {
		o := JobOptions{Sharding: splits.Dynamic, Epochs: 2, Delivery: DeliveryExactlyOnce, ConsumerTTL: 5 * time.Second, GCAfter: 10 * time.Second}
		var p ranges.Delivered
		if r.IntN(2) == 0 {
			p.Returned = map[int64]map[int64]ranges.Set{0: {int64(r.IntN(6)): ranges.Span(0, 2)}}
		}
		return NewResumeJob(compatCreate(job, "fp0", o), ResumeBody{From: d.jobID(job), Part: d.pick("c", 3), Want: 1 + r.IntN(2), Delivered: p})
	}
	var c Create
	if r.IntN(2) == 0 {
		o := compatOptions[r.IntN(len(compatOptions))]
		o.ConsumerTTL, o.GCAfter = 5*time.Second, 10*time.Second
		c = compatCreate(job, fp, o)
	} else {
		o := compatRequests[r.IntN(len(compatRequests))]
		o.ConsumerTTL, o.GCAfter = 5*time.Second, 10*time.Second
		c = compatRequest(job, fp, o)
	}
	switch {
	case c.Options.Sharding() == jobspec.Static:
		c.StaticWorkers = []string{d.pick("w", 5), d.pick("w", 5), d.pick("w", 5)}
	case c.Options.Autoscale() && r.IntN(2) == 0:
		c.Scale = &ScaleStart{Workers: 1 + r.IntN(4), From: d.pick("j", 4)}
	}
	if d.owners {
		c.Owner = compatOwners[r.IntN(len(compatOwners))]
	}
	return NewCreateJob(c)
}

// compatOwners are the owners of the owners part's jobs: none (the
// default tenant's), and principals of two tenants and the default one.
var compatOwners = []*Owner{
	nil,
	{Principal: "spiffe://prod/client/alice", Tenant: "vision"},
	{Principal: "spiffe://prod/client/bob", Tenant: "nlp"},
	{Principal: "spiffe://prod/client/carol"},
}

// compatScriptOwners starts the owners part: datasets registered with
// an owner, a job of each tenant with a consumer, a consumer of another
// tenant refused, and datasets garbage-collected or spared. Its jobs
// were recorded when DYNAMIC jobs autoscaled by default: they ask for
// auto since the default became all (issue 42).
func compatScriptOwners() []Command {
	alice, bob := *compatOwners[1], *compatOwners[2]
	o := compatRequest("owned-a", "fp2", jobspec.Options{Sharding: jobspec.Dynamic, Workers: jobspec.AutoWorkers})
	o.Owner = &alice
	b := compatRequest("owned-b", "fp2", jobspec.Options{Sharding: jobspec.Dynamic, Workers: jobspec.AutoWorkers})
	b.Owner = &bob
	stolen := o
	stolen.Owner = &bob
	return []Command{
		NewRegisterOwnedDataset(Dataset{Fingerprint: "fp2", Spec: []byte("spec of fp2"), NumSplits: 4}, alice),
		NewRegisterOwnedDataset(Dataset{Fingerprint: "fp2", Spec: []byte("spec of fp2"), NumSplits: 4}, bob), // alice's still
		NewRegisterOwnedDataset(Dataset{Fingerprint: "fp3", Spec: []byte("spec of fp3"), NumSplits: 2}, bob),
		NewRegisterDataset(Dataset{Fingerprint: "fp4", Spec: []byte("spec of fp4"), NumSplits: 2}),
		NewCreateJob(o), NewAttachConsumer("owned-a", "c0"),
		NewCreateJob(b), NewAttachConsumer("owned-b", "c0"),
		NewCreateJob(stolen),                         // another tenant's job: refused
		NewGarbageCollectDataset("fp2", time.Minute), // read by jobs: refused
		NewGarbageCollectDataset("fp3", time.Hour),   // within its grace: refused
		NewGarbageCollectDataset("fp4", time.Hour),   // of an older entry: removed
		NewGarbageCollectDataset("fp3", 0),           // removed
		NewGarbageCollectDataset("fp3", 0),           // gone: no error
		NewPutToken("team-a", Token{Hash: compatHash("a"), Tenant: "vision", CreatedBy: "spiffe://prod/client/ops"}),
		NewPutToken("team-a", Token{Hash: compatHash("a2"), Tenant: "nlp", CreatedBy: "spiffe://prod/client/ops"}), // exists: refused
		NewPutToken("team-x", Token{Hash: []byte("short"), CreatedBy: "spiffe://prod/client/ops"}),                 // not a SHA-256: refused
		NewPutToken("ops-b", Token{Hash: compatHash("b"), Admin: true, CreatedBy: "spiffe://prod/client/ops"}),
		NewDeleteToken("team-a"),
		NewDeleteToken("team-a"), // gone: false
	}
}

// compatScriptQuotas starts the quotas part: tenants' datasets, jobs
// and consumers wrapped in their limits (Quota), applied and refused.
func compatScriptQuotas() []Command {
	alice, bob := *compatOwners[1], *compatOwners[2]
	l := Limits{MaxJobs: 100, MaxDatasets: 100, MaxConsumers: 100, MaxSpecBytes: 1 << 20, AdminReserve: 16}
	none := Limits{}
	o := compatRequest("quota-a", "fp5", jobspec.Options{Sharding: jobspec.Dynamic, Workers: jobspec.AutoWorkers})
	o.Owner = &alice
	b := compatRequest("quota-b", "fp5", jobspec.Options{Sharding: jobspec.Dynamic, Workers: jobspec.AutoWorkers})
	b.Owner = &bob
	return []Command{
		NewQuota(l, NewRegisterOwnedDataset(Dataset{Fingerprint: "fp5", Spec: []byte("spec of fp5"), NumSplits: 4}, alice)),
		NewQuota(none, NewRegisterOwnedDataset(Dataset{Fingerprint: "fp6", Spec: []byte("spec of fp6"), NumSplits: 2}, bob)), // refused: quota
		NewQuota(none, NewRegisterOwnedDataset(Dataset{Fingerprint: "fp5", Spec: []byte("spec of fp5"), NumSplits: 4}, bob)), // registered: adds nothing
		NewQuota(l, NewCreateJob(o)),
		NewQuota(none, NewCreateJob(b)), // refused: quota
		NewQuota(l, NewAttachConsumer("quota-a", "c0")),
		NewQuota(none, NewAttachConsumer("quota-a", "c1")), // refused: quota
		NewQuota(none, NewAttachConsumer("quota-a", "c0")), // a renewal: adds nothing
		NewQuota(l, NewPutKV("k", []byte("v"))),            // refused: not guarded
	}
}

// compatHash is a token secret's hash.
func compatHash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// dynamic picks a command for a DYNAMIC job.
func (d *compatDriver) dynamic(job string, j *Job) Command {
	r := d.r
	worker, consumer := d.pick("w", 5), d.pick("c", 3)
	if live := j.liveWorkers(); len(live) > 0 && r.IntN(5) > 0 {
		worker = live[r.IntN(len(live))]
	}
	if ids := j.ConsumerIDs(); len(ids) > 0 && r.IntN(4) > 0 {
		consumer = ids[r.IntN(len(ids))]
	}
	l := d.leases[job+"/"+worker]
	switch r.IntN(30) {
	case 0, 1:
		return NewAttachConsumer(job, consumer)
	case 2, 3:
		return d.heartbeat(job, consumer)
	case 4:
		c := NewAssignTask(job, worker)
		if r.IntN(4) == 0 {
			c.Version = 1
		}
		return c
	case 5, 6, 7, 8:
		return d.lease(job, worker)
	case 9, 10:
		if j.Dynamic.Tracked() {
			return d.produce(job, worker, l)
		}
		return d.finish(job, worker, l)
	case 11, 12:
		if j.Dynamic.Tracked() {
			return d.receipts(job, consumer)
		}
		return d.detach(job, consumer)
	case 13:
		if len(l.Splits) == 0 {
			return NewHandBackSplits(job, d.jobID(job), worker, 0, []int64{r.Int64N(6)})
		}
		return NewHandBackSplits(job, d.jobID(job), worker, l.Epoch, l.Splits[len(l.Splits)-1:])
	case 14:
		if r.IntN(2) == 0 {
			return NewDrainTask(job, d.jobID(job), worker, d.inc[worker])
		}
		c := NewRejoinTask(job, worker)
		if r.IntN(3) == 0 {
			c.Version = 1
		}
		return c
	case 15:
		if r.IntN(3) > 0 {
			return NewExpireSuperseded(worker, d.inc[worker])
		}
		return NewExpireWorker(worker)
	case 16:
		d.inc[worker]++ // a restart
		return d.lease(job, worker)
	case 17:
		var release []string
		if r.IntN(2) == 0 {
			release = []string{worker}
		}
		return NewAllocateJob(job, 1+r.IntN(3), "fair share", release)
	case 18:
		return d.offload(job, consumer)
	case 19:
		return NewReportRound(job, r.IntN(3), r.Int64N(200))
	case 20:
		return d.end(job, worker)
	case 21:
		return d.detach(job, consumer)
	case 22:
		return NewExpireConsumers(d.now)
	case 23:
		return NewGarbageCollectJob(job)
	case 24, 25:
		return NewAssignTask(job, d.pick("w", 5))
	}
	return d.lease(job, worker)
}

// fixed picks a command for an OFF or STATIC job.
func (d *compatDriver) fixed(job string) Command {
	worker, consumer := d.pick("w", 5), d.pick("c", 3)
	switch d.r.IntN(8) {
	case 0, 1:
		return NewAttachConsumer(job, consumer)
	case 2:
		return NewAssignTask(job, worker)
	case 3, 4:
		return d.end(job, worker)
	case 5:
		return d.detach(job, consumer)
	case 6:
		return NewExpireConsumers(d.now)
	}
	return NewGarbageCollectJob(job)
}

// any picks any command at all, most of them about job.
func (d *compatDriver) any(job string) Command {
	r := d.r
	worker, consumer := d.pick("w", 5), d.pick("c", 3)
	switch r.IntN(12) {
	case 0:
		fp := d.pick("fp", 2)
		n := map[string]int64{"fp0": 6, "fp1": 16}[fp]
		return NewRegisterDataset(Dataset{Fingerprint: fp, Spec: []byte("spec of " + fp), NumSplits: n})
	case 1:
		return NewPutKV(d.pick("k", 4), []byte(d.pick("v", 100)))
	case 2:
		return NewDeleteKV(d.pick("k", 4))
	case 3:
		return NewPutKVIfAbsent(d.pick("k", 4), []byte(d.pick("v", 100)))
	case 4:
		return d.create(job)
	case 5:
		return NewExpireConsumers(d.now - r.Int64N(int64(30*time.Second)))
	case 6:
		if r.IntN(3) == 0 {
			return NewExpireWorker(worker)
		}
		return NewExpireConsumers(d.now)
	case 7:
		return d.receipts(job, consumer)
	case 8:
		return d.offload(job, consumer)
	case 9:
		return NewReportRound(job, r.IntN(3), r.Int64N(200))
	case 10:
		return d.lease(job, worker)
	}
	return d.finish(job, worker, d.leases[job+"/"+worker])
}

func (d *compatDriver) heartbeat(job, consumer string) Command {
	r := d.r
	k := job + "/" + consumer
	d.batch[k] += 40 + r.Int64N(120)
	m := &autoscale.Metric{BatchTime: 0.01 + r.Float64()*0.04, ResultQueue: float64(r.IntN(12)), Stall: r.Float64() / 2, Batches: d.batch[k], Workers: r.IntN(4)}
	return NewHeartbeat(job, consumer, m)
}

func (d *compatDriver) detach(job, consumer string) Command {
	c := NewDetachConsumer(job, consumer)
	if d.r.IntN(3) == 0 {
		c.Version = 1
	}
	return c
}

func (d *compatDriver) end(job, worker string) Command {
	if d.r.IntN(2) == 0 {
		return NewEndTaskOfJob(job, d.jobID(job), worker, "")
	}
	return newEndTask(job, worker, "boom: "+worker)
}

func (d *compatDriver) finish(job, worker string, l splits.Lease) Command {
	ids := slices.Clone(l.Splits)
	if len(ids) == 0 || d.r.IntN(6) == 0 {
		ids = []int64{d.r.Int64N(16)}
	}
	return NewFinishSplits(job, worker, l.Epoch, ids)
}

func (d *compatDriver) produce(job, worker string, l splits.Lease) Command {
	var done []ranges.SplitEmitted
	for _, id := range l.Splits {
		done = append(done, ranges.SplitEmitted{Split: id, Emitted: ranges.Span(0, 1+d.r.Int64N(4))})
	}
	if d.r.IntN(2) == 0 {
		return NewProduceSplitsOfJob(job, d.jobID(job), worker, l.Epoch, done)
	}
	return newProduceSplits(job, worker, l.Epoch, done)
}

func (d *compatDriver) lease(job, worker string) Command {
	r := d.r
	req, n := uint64(r.IntN(4)), 1+r.IntN(3)
	switch r.IntN(4) {
	case 0:
		return NewLeaseSplits(job, worker, req, n)
	case 1:
		return NewLeaseSplitsAs(job, worker, d.inc[worker], req, n)
	case 2:
		return NewLeaseSplitsOfJob(job, d.jobID(job), worker, d.inc[worker], req, n)
	}
	return NewLeaseSplitsPreferring(job, d.jobID(job), worker, d.inc[worker], req, n, ranges.Of(r.Int64N(16), r.Int64N(16)))
}

// receipts reports what consumer got of every worker's last lease of job
// (all of a split, or its first element), fencing an expired worker now
// and then.
func (d *compatDriver) receipts(job, consumer string) Command {
	var rs []Receipt
	for _, key := range slices.Sorted(maps.Keys(d.leases)) {
		if !strings.HasPrefix(key, job+"/") {
			continue
		}
		l := d.leases[key]
		for _, id := range l.Splits {
			got := ranges.Span(0, 1+d.r.Int64N(4))
			rs = append(rs, Receipt{Epoch: l.Epoch, Split: id, Got: got})
		}
	}
	var fenced []string
	if j, ok := d.s.Jobs[job]; ok && d.r.IntN(2) == 0 {
		for _, w := range slices.Sorted(maps.Keys(j.Workers)) {
			if j.Workers[w].Expired {
				fenced = append(fenced, w)
			}
		}
	}
	k := job + "/" + consumer
	d.seq[k]++
	return NewReceipts(job, consumer, d.seq[k], rs, fenced)
}

func (d *compatDriver) offload(job, consumer string) Command {
	r := d.r
	b := OffloadBody{Job: job, Consumer: consumer}
	switch r.IntN(5) {
	case 0:
		b.LocalWorker = true
	case 1:
		b.Remote = []string{RemoteOn, RemoteOff}[r.IntN(2)]
	case 2:
		b.Report = &OffloadReport{Mode: "auto", Fraction: 0.25 * float64(r.IntN(5)), Local: r.Int64N(9), Remote: r.Int64N(9), Reason: "measured"}
	case 3:
		b.Retire = true
	default:
		b.Cut = 1 + r.IntN(3)
	}
	return NewOffload(b)
}

// observe notes what a command's result tells the driver.
func (d *compatDriver) observe(c Command, v any) {
	if l, ok := v.(splits.Lease); ok && c.Type == TypeLeaseSplits {
		var b leaseSplitsBody
		if decodeBody(c, &b) == nil {
			d.leases[b.Job+"/"+b.Worker] = l
		}
	}
}

// compatScript starts the log: the datasets, and a job of each kind
// (compatOptions) that the random part leaves alone, with a consumer, two
// workers and their leases, so that every snapshot holds one of each.
func compatScript() []Command {
	cmds := []Command{
		NewRegisterDataset(Dataset{Fingerprint: "fp0", Spec: []byte("spec of fp0"), NumSplits: 6}),
		NewRegisterDataset(Dataset{Fingerprint: "fp1", Spec: []byte("spec of fp1"), NumSplits: 16}),
	}
	for i, o := range compatOptions {
		job := fmt.Sprintf("kind%d", i)
		cmds = append(cmds, LegacyCreateJob(job, "fp1", o, []string{"w0", "w1"}), NewAttachConsumer(job, "c0"))
		for _, w := range []string{"w0", "w1"} {
			cmds = append(cmds, NewAssignTask(job, w), NewLeaseSplits(job, w, 1, 2))
		}
	}
	return cmds
}

// compatScriptV6 starts the v6 part: a job of each kind again, created
// by CreateJob v6 (the legacy kinds converted, then the requests), with a
// consumer, two workers and their leases.
func compatScriptV6() []Command {
	var cmds []Command
	add := func(c Create) {
		c.StaticWorkers = []string{"w0", "w1"}
		if c.Options.Sharding() != jobspec.Static {
			c.StaticWorkers = nil
		}
		cmds = append(cmds, NewCreateJob(c), NewAttachConsumer(c.Name, "c0"))
		for _, w := range []string{"w0", "w1"} {
			cmds = append(cmds, NewAssignTask(c.Name, w), NewLeaseSplits(c.Name, w, 1, 2))
		}
	}
	for i, o := range compatOptions {
		add(compatCreate(fmt.Sprintf("kind6-%d", i), "fp1", o))
	}
	for i, o := range compatRequests {
		add(compatRequest(fmt.Sprintf("req6-%d", i), "fp1", o))
	}
	// A consumer that asks for another kind's job by its name, in both
	// directions: a job of a CreateJob v1..v5 asked for by v6, and the
	// other way; and the same options, which join.
	cmds = append(cmds,
		NewCreateJob(compatCreate("kind1", "fp1", compatOptions[0])),
		LegacyCreateJob("kind6-0", "fp1", compatOptions[1], nil),
		NewCreateJob(compatCreate("kind0", "fp1", compatOptions[0])),
		LegacyCreateJob("kind6-1", "fp1", compatOptions[1], nil),
	)
	return cmds
}
