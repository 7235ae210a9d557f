package fsm

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

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
	r := d.r
	if r.IntN(8) == 0 {
		o := JobOptions{Sharding: splits.Dynamic, Epochs: 2, Delivery: DeliveryExactlyOnce, ConsumerTTL: 5 * time.Second, GCAfter: 10 * time.Second}
		var p ranges.Delivered
		if r.IntN(2) == 0 {
			p.Returned = map[int64]map[int64]ranges.Set{0: {int64(r.IntN(6)): ranges.Span(0, 2)}}
		}
		return NewResumeJob(job, "fp0", o, ResumeBody{From: d.jobID(job), Part: d.pick("c", 3), Want: 1 + r.IntN(2), Delivered: p})
	}
	o := compatOptions[r.IntN(len(compatOptions))]
	o.ConsumerTTL, o.GCAfter = 5*time.Second, 10*time.Second
	fp := d.pick("fp", 2)
	if o.Sharding == splits.Static {
		return NewCreateJob(job, fp, o, []string{d.pick("w", 5), d.pick("w", 5), d.pick("w", 5)})
	}
	if o.Autoscale && r.IntN(2) == 0 {
		return NewCreateJobAt(job, fp, o, nil, &ScaleStart{Workers: 1 + r.IntN(4), From: d.pick("j", 4)})
	}
	return NewCreateJob(job, fp, o, nil)
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
		cmds = append(cmds, NewCreateJob(job, "fp1", o, []string{"w0", "w1"}), NewAttachConsumer(job, "c0"))
		for _, w := range []string{"w0", "w1"} {
			cmds = append(cmds, NewAssignTask(job, w), NewLeaseSplits(job, w, 1, 2))
		}
	}
	return cmds
}
