package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/ranges"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// Checkpoints of exactly-once DYNAMIC jobs (splits/resume.go has the
// cluster's side).
//
// Iterator.Checkpoint covers exactly the batches Next (or All) has
// returned: batches prefetched and not yet returned are not in it, and a
// job resumed from it delivers them again. JobOptions.Resume resumes: the
// job is created again without what the checkpoint covers (an existing job
// of that name is replaced; when it is the job the checkpoint was taken
// of, the cluster fences its consumers still attached, such as a
// preempted trainer's, rather than wait for their leases: ErrFenced), in a new process,
// on a cluster restarted from its data dirs, or on one with more or fewer
// nodes. A job with several consumers (data-parallel ranks) resumes once
// every consumer it had when the checkpoints were taken has resumed with
// its own; until then it hands out nothing. A coordinated job's checkpoint
// names its consumer index and waits for all NumConsumers ranks; the
// resumed job's rounds start at 0 again, every rank at once.
//
// The encoding: "FMCK", a format version (2 bytes, big endian), the CBOR
// body, and a CRC-32C of everything before it (4 bytes, big endian).
// Format 2 adds the body's MAC (api.CheckpointMAC, keyed by the
// consumer's capability, which the cluster recomputes from the job's key
// on resume): format 1 checkpoints carry none, and are refused.

// CheckpointVersion is the checkpoint format this client writes and reads.
const CheckpointVersion = 2

const checkpointMagic = "FMCK"

// ErrBadCheckpoint is wrapped by every error about a checkpoint that
// cannot be used: not one, truncated, corrupted, of a newer format, or of
// another job, dataset or options.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// ErrResumeWait is wrapped by Next's error when the job resumed from a
// checkpoint still waited for the checkpoints of its other consumers after
// Options.ResumeWait (waitResumed).
var ErrResumeWait = errors.New("the resumed job still waits for the checkpoints of its other consumers")

// checkpoint is a checkpoint's body.
type checkpoint struct {
	Job         string `cbor:"1,keyasint"`
	JobID       uint64 `cbor:"2,keyasint"`
	Fingerprint string `cbor:"3,keyasint"`
	Epochs      int64  `cbor:"4,keyasint"`
	NumSplits   int64  `cbor:"5,keyasint"`
	// Consumer took it; Consumers is how many the job had then.
	Consumer  string `cbor:"6,keyasint"`
	Consumers int    `cbor:"7,keyasint"`
	// Batches: how many the consumer had returned (its resumed iterator
	// goes on counting from there).
	Batches   int64            `cbor:"8,keyasint"`
	Delivered ranges.Delivered `cbor:"9,keyasint"`
	// Coordinated jobs: the consumer's index (its rank).
	Coordinated bool `cbor:"10,keyasint,omitempty"`
	Index       int  `cbor:"11,keyasint,omitempty"`
	// Options are the job's when it was taken, what offload auto chose
	// for it included (a cut: OffloadBoundary): a resume adopts those it
	// leaves unset from them once the job is gone (adopt.go). Absent in
	// checkpoints of older clients.
	Options *api.JobOptions `cbor:"12,keyasint,omitempty"`
	// MAC (format 2) is api.CheckpointMAC of the part the cluster takes
	// (resumeFrom), under the consumer's capability; absent when the
	// cluster gave none (a node of an older release answered the attach).
	MAC []byte `cbor:"13,keyasint,omitempty"`
	// Audit (deterministic jobs): the visitation digests of the epochs
	// the consumer returned batches of (audit.go).
	Audit []auditEntry `cbor:"14,keyasint,omitempty"`
	// Position (deterministic jobs) is the next batch of the sequence:
	// what the consumer returned is every batch before it, so Delivered
	// is left empty (but for DoneBefore) and the resume computes it from
	// the layout (expandPosition): a checkpoint of a position, not a set.
	Position *orderPos `cbor:"15,keyasint,omitempty"`
	// Skips (deterministic jobs) are the consumer's
	// JobOptions.SkipBatches.
	Skips [][2]int64 `cbor:"16,keyasint,omitempty"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (c *checkpoint) encode() ([]byte, error) {
	body, err := cbor.Marshal(c)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(checkpointMagic)+2+len(body)+4)
	out = append(out, checkpointMagic...)
	out = binary.BigEndian.AppendUint16(out, CheckpointVersion)
	out = append(out, body...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, crcTable)), nil
}

// maxCheckpointIntervals bounds the intervals of a checkpoint a client
// takes in: a checkpoint goes to the cluster in one Raft command.
const maxCheckpointIntervals = jobspec.MaxReceiptIntervals

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadCheckpoint, fmt.Sprintf(format, args...))
	}
	const head = len(checkpointMagic) + 2
	switch {
	case len(b) < len(checkpointMagic) || !bytes.Equal(b[:len(checkpointMagic)], []byte(checkpointMagic)):
		return nil, bad("not a feedmesh checkpoint (it does not start with %q)", checkpointMagic)
	case len(b) < head+4:
		return nil, bad("truncated (%d bytes)", len(b))
	}
	if v := binary.BigEndian.Uint16(b[len(checkpointMagic):]); v != CheckpointVersion {
		if v > CheckpointVersion {
			return nil, bad("format version %d, written by a newer feedmesh; this one reads version %d", v, CheckpointVersion)
		}
		if v == 1 {
			return nil, bad("format version 1, written by a feedmesh from before checkpoints were signed by the cluster: this one reads version %d only, and a cluster refuses a checkpoint without its MAC (it could be forged); read the dataset afresh (without resume), and checkpoint again", CheckpointVersion)
		}
		return nil, bad("format version %d is not one this feedmesh reads (%d)", v, CheckpointVersion)
	}
	n := len(b) - 4
	if got, want := crc32.Checksum(b[:n], crcTable), binary.BigEndian.Uint32(b[n:]); got != want {
		return nil, bad("corrupted or truncated (checksum %08x, want %08x)", got, want)
	}
	var c checkpoint
	if err := cbor.Unmarshal(b[head:n], &c); err != nil {
		return nil, bad("corrupted: %v", err)
	}
	switch {
	case c.Job == "" || c.Fingerprint == "" || c.Consumer == "":
		return nil, bad("incomplete: job %q, dataset %q, consumer %q", c.Job, c.Fingerprint, c.Consumer)
	case c.Epochs < 1 || c.NumSplits < 0 || c.Consumers < 1 || c.Consumers > jobspec.MaxResumeParts || c.Batches < 0:
		return nil, bad("epochs %d, splits %d, consumers %d, batches %d", c.Epochs, c.NumSplits, c.Consumers, c.Batches)
	}
	if p := c.Position; p != nil && (p.Epoch < 0 || p.Epoch > c.Epochs || p.Epoch != c.Delivered.DoneBefore) {
		return nil, bad("position in epoch %d of %d (done before %d)", p.Epoch, c.Epochs, c.Delivered.DoneBefore)
	}
	if len(c.Skips) > jobspec.MaxSkipRanges {
		return nil, bad("%d skip ranges, at most %d", len(c.Skips), jobspec.MaxSkipRanges)
	}
	for _, s := range c.Skips {
		if s[0] < 0 || s[1] <= s[0] {
			return nil, bad("skip range [%d, %d)", s[0], s[1])
		}
	}
	if err := c.Delivered.Validate(c.NumSplits, c.Epochs, jobspec.MaxEpochs, maxCheckpointIntervals); err != nil {
		return nil, bad("%v", err)
	}
	return &c, nil
}

// resumeFrom checks checkpoint b against the job about to be distributed
// and returns its part for the cluster.
func resumeFrom(b []byte, spec *pipeline.Spec, n jobspec.Normalized) (*checkpoint, *api.ResumePart, error) {
	c, err := decodeCheckpoint(b)
	if err != nil {
		return nil, nil, err
	}
	fp, err := spec.Fingerprint()
	if err != nil {
		return nil, nil, err
	}
	o := n.Job()
	var diffs []string
	if c.Job != n.Name() {
		diffs = append(diffs, fmt.Sprintf("it is of job %q, not %q", c.Job, n.Name()))
	}
	if d := shareDiff(c, spec); d != "" {
		diffs = append(diffs, d)
	}
	if c.Fingerprint != fp {
		diffs = append(diffs, fmt.Sprintf("it is of another dataset (spec fingerprint %s, this spec's %s)", c.Fingerprint, fp))
	}
	if c.Epochs != o.Epochs() {
		diffs = append(diffs, fmt.Sprintf("it is of a job of %d epochs, not %d", c.Epochs, o.Epochs()))
	}
	switch {
	case c.Coordinated != o.Coordinated():
		diffs = append(diffs, fmt.Sprintf("it is of a job with coordinated reads %v, not %v", c.Coordinated, o.Coordinated()))
	case c.Coordinated && c.Consumers != o.NumConsumers():
		diffs = append(diffs, fmt.Sprintf("it is of a coordinated job of %d consumers, not %d", c.Consumers, o.NumConsumers()))
	case c.Coordinated && c.Index != n.Consumer().Index():
		diffs = append(diffs, fmt.Sprintf("it is consumer index %d's, not %d's", c.Index, n.Consumer().Index()))
	}
	if len(diffs) > 0 {
		return nil, nil, fmt.Errorf("%w: %s", ErrBadCheckpoint, strings.Join(diffs, "; "))
	}
	if c.Position != nil {
		if c.Delivered, err = expandPosition(spec, *c.Position); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
		}
		if k := c.Delivered.Intervals(); k > maxCheckpointIntervals {
			return nil, nil, fmt.Errorf("%w: its position is window %d of epoch %d, %d intervals of the cluster's record, more than a resume may hold (%d)", ErrBadCheckpoint, c.Position.Window, c.Position.Epoch, k, maxCheckpointIntervals)
		}
	}
	return c, c.part(), nil
}

// part is the checkpoint's part, as the cluster takes it (with its MAC;
// a deterministic job's once its position is expanded).
func (c *checkpoint) part() *api.ResumePart {
	return &api.ResumePart{From: c.JobID, Part: c.Consumer, Want: c.Consumers, Delivered: c.Delivered, MAC: c.MAC}
}

// warnResumeWaiting says that the resumed job waits for the checkpoints
// of its other consumers, as soon as the iterator finds it so.
func (it *Iterator) warnResumeWaiting(x *api.ExactInfo) {
	limit := fmt.Sprintf("reading fails after %v (Options.ResumeWait; feedmesh read --resume-wait, Python resume_wait)", it.c.opts.ResumeWait)
	if it.c.opts.ResumeWait < 0 {
		limit = "it waits for ever (Options.ResumeWait < 0; feedmesh read --resume-wait 0)"
	}
	it.logger().Warn(fmt.Sprintf("job %q: the resumed job waits for the checkpoints of its other consumers: %d of %d are in, and it hands out nothing until each consumer it had has resumed with its own checkpoint (a job read by two `feedmesh read --take --checkpoint` runs within gc_after had two consumers); resume them, or %s",
		it.job, x.ResumeHave, x.ResumeWant, limit), "job", it.job, "have", x.ResumeHave, "want", x.ResumeWant)
}

// waitResumed fails the iteration if the job it resumed still waits for
// other consumers' checkpoints after wait (Options.ResumeWait), as the
// cluster says then (or as last heard, if it cannot be asked).
func (it *Iterator) waitResumed(wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-it.ctx.Done():
		return
	case <-t.C:
	}
	it.mu.Lock()
	x := it.info.Exact
	it.mu.Unlock()
	var resp api.JobGetResponse
	if err := it.c.call(it.ctx, api.MethodJobGet, api.JobRequest{Job: it.job}, &resp); err == nil && resp.Job.ID == it.jobID {
		x = resp.Job.Exact
	}
	if x == nil || x.ResumeHave >= x.ResumeWant {
		return
	}
	it.fail(fmt.Errorf("job %q: %w after %v (Options.ResumeWait; feedmesh read --resume-wait, Python resume_wait): %d of the %d checkpoints it waits for are in (one per consumer the job had when they were taken, and one per consumer the cluster saw receive elements), and it hands out nothing until all are; resume each of the job's other consumers with its own checkpoint (a job read by two `feedmesh read --take --checkpoint` runs within gc_after needs both runs' checkpoints); if one is lost, the job cannot resume: read the dataset afresh under a new job name",
		it.job, ErrResumeWait, wait, x.ResumeHave, x.ResumeWant))
}

// tracker is what reached the trainer through this consumer of an
// exactly-once job: the batches Next returned. Safe for concurrent use.
type tracker struct {
	mu         sync.Mutex
	part       ranges.Delivered
	unreturned map[key]ranges.Set // received, not yet returned by Next
	batches    int64              // returned, over the checkpoints resumed from
	// consumers is the most consumers the job was heard to have at once:
	// a job resumed from this consumer's checkpoint waits for as many.
	// (Once a rank has closed, the others hear of one consumer fewer.)
	consumers int
	// resumedPart: the iterator resumed from a checkpoint (and so may claim
	// epochs done only if the job resumed from that one checkpoint alone).
	resumedPart bool
	saidWaiting bool // beat has reported the job waiting for checkpoints
	// intervals bounds the part's intervals (returns that shrink Missing
	// are not subtracted; beat recounts); past maxCheckpointIntervals the
	// part is dropped (overflow) and the tracker keeps nothing more: the
	// memory stays bounded, and Checkpoint says why it cannot.
	intervals int
	overflow  bool
}

func newTracker(from *checkpoint) *tracker {
	t := &tracker{unreturned: map[key]ranges.Set{}}
	if from != nil {
		t.part, t.batches, t.resumedPart = from.Delivered.Clone(), from.Batches, true
		t.intervals = t.part.Intervals()
	}
	return t
}

// received notes a batch's elements as received (in the buffer).
func (t *tracker) received(prov []batch.ProvRange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range prov {
		k := key{r.Epoch, r.Split}
		u := t.unreturned[k]
		u.AddSpan(r.Lo, r.Hi)
		t.unreturned[k] = u
	}
}

// returned notes a batch as returned to the trainer.
func (t *tracker) returned(prov []batch.ProvRange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.batches++
	for _, r := range prov {
		k := key{r.Epoch, r.Split}
		if u := withoutSpan(t.unreturned[k], r.Lo, r.Hi); u.Empty() {
			delete(t.unreturned, k)
		} else {
			t.unreturned[k] = u
		}
		if t.overflow {
			continue
		}
		if t.intervals += t.part.Return(r.Epoch, r.Split, r.Lo, r.Hi); t.intervals > maxCheckpointIntervals {
			t.overflow, t.part = true, ranges.Delivered{}
		}
	}
}

// withoutSpan returns u without [lo, hi). Batches are returned in the
// order they were received, so [lo, hi) is usually u's first interval or
// its start: that case trims u in place (u is the tracker's own) instead of
// allocating.
func withoutSpan(u ranges.Set, lo, hi int64) ranges.Set {
	if len(u) >= 2 && u[0] == lo && hi <= u[1] {
		if hi == u[1] {
			return u[2:]
		}
		u[0] = hi
		return u
	}
	return u.Minus(ranges.Set{lo, hi})
}

// beat takes a heartbeat's news: while this consumer is the only one the
// job has had (none left, and it is the job's only checkpoint if the job
// resumed), every element of a settled epoch went to it, so the part says
// "done, except what is in the buffer" for those epochs instead of listing
// what was returned. That keeps a single consumer's checkpoint small over
// many epochs.
//
// It reports whether the job has just been found waiting for other
// consumers' checkpoints (once per iterator, for the log).
func (t *tracker) beat(info api.JobInfo, consumer string) (waiting bool) {
	x := info.Exact
	t.mu.Lock()
	t.consumers = max(t.consumers, len(info.Consumers))
	if x != nil && x.ResumeHave < x.ResumeWant && !t.saidWaiting {
		t.saidWaiting, waiting = true, true
	}
	t.mu.Unlock()
	if x == nil || len(info.Consumers) != 1 || info.Consumers[0] != consumer || x.Departures != 0 {
		return waiting
	}
	if x.ResumeWant > 0 && (!t.resumedPart || x.ResumeWant != 1 || x.ResumeHave != 1) {
		return waiting
	}
	if x.ResumeWant == 0 && t.resumedPart {
		return waiting
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if x.SettledBefore <= t.part.DoneBefore || t.overflow {
		return waiting
	}
	pending := map[int64]map[int64]ranges.Set{}
	for k, u := range t.unreturned {
		if k.epoch >= t.part.DoneBefore && k.epoch < x.SettledBefore {
			if pending[k.epoch] == nil {
				pending[k.epoch] = map[int64]ranges.Set{}
			}
			pending[k.epoch][k.split] = u
		}
	}
	t.part.Settle(x.SettledBefore, pending)
	t.intervals = t.part.Intervals()
	return waiting
}

// snapshot returns a copy of the part, the batches returned and the most
// consumers heard of; an error once the part has outgrown a checkpoint.
func (t *tracker) snapshot() (ranges.Delivered, int64, int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.overflow {
		return ranges.Delivered{}, 0, 0, fmt.Errorf("what this consumer returned outgrew a checkpoint (%d intervals; with several consumers each lists what it returned, about one interval per batch per epoch)", maxCheckpointIntervals)
	}
	p := t.part.Clone()
	if len(p.Missing) == 0 {
		p.Missing = nil
	}
	if len(p.Returned) == 0 {
		p.Returned = nil
	}
	return p, t.batches, t.consumers, nil
}

// Checkpoint returns the iterator's checkpoint: what reached the trainer
// through this consumer, exactly the batches Next (or All) returned.
// Store it with the model's checkpoint, and pass it as JobOptions.Resume
// to go on from there (see the package comment on checkpoint.go's
// semantics). Only exactly-once DYNAMIC jobs checkpoint. Call it from the
// goroutine that calls Next, between two calls.
func (it *Iterator) Checkpoint() ([]byte, error) {
	it.mu.Lock()
	exact := it.info.Options.Delivery == jobspec.ExactlyOnce
	it.mu.Unlock()
	if it.track == nil || !exact {
		return nil, fmt.Errorf("checkpoint of job %q: only exactly-once DYNAMIC jobs (without share) checkpoint", it.job)
	}
	part, n, consumers, err := it.track.snapshot()
	if err == nil && it.ord == nil { // a deterministic job's is its position (below)
		if k := part.Intervals(); k > maxCheckpointIntervals {
			err = fmt.Errorf("%d intervals, more than a checkpoint may hold (%d)", k, maxCheckpointIntervals)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint of job %q: %w", it.job, err)
	}
	it.mu.Lock()
	info := it.info
	jo := info.Options
	if it.off != nil && it.off.cut > 0 {
		jo.OffloadBoundary = it.off.cut // cut while it ran, maybe after the last heartbeat
	}
	it.mu.Unlock()
	jo.Resume, jo.ConsumerIndex, jo.Offload, jo.LocalCPUs = nil, 0, "", 0 // the job's options, not this consumer's
	consumers = max(consumers, len(info.Consumers), 1)
	if info.Options.Coordinated {
		// Its resumed job waits for every rank's checkpoint.
		consumers = info.Options.NumConsumers
	}
	c := checkpoint{
		Job: it.job, JobID: it.jobID, Fingerprint: info.Fingerprint, Epochs: info.Options.Epochs, NumSplits: info.NumSplits,
		Consumer: it.consumer, Consumers: consumers, Batches: n, Delivered: part,
		Coordinated: info.Options.Coordinated, Index: it.index, Options: &jo,
	}
	if r := it.ord; r != nil {
		it.mu.Lock()
		c.Audit = r.entries()
		c.Position = &orderPos{Epoch: r.cur.epoch, Window: r.cur.w, Batch: r.cur.k}
		if r.plan.Consumers > 1 {
			c.Position.Consumer, c.Position.Consumers = r.plan.Consumer, r.plan.Consumers
		}
		c.Skips = r.skipRs
		it.mu.Unlock()
		c.Delivered = ranges.Delivered{DoneBefore: c.Position.Epoch}
	}
	if len(it.capability) > 0 {
		// The MAC is of the part the cluster takes: a deterministic job's
		// with its position expanded, as the resume expands it.
		part := *c.part()
		if c.Position != nil {
			if part.Delivered, err = expandPlanPosition(it.ord.plan, *c.Position); err != nil {
				return nil, fmt.Errorf("checkpoint of job %q: %w", it.job, err)
			}
		}
		if c.MAC, err = api.CheckpointMAC(it.capability, it.job, part); err != nil {
			return nil, fmt.Errorf("checkpoint of job %q: %w", it.job, err)
		}
	}
	return c.encode()
}
