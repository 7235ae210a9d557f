package client

import (
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
)

// WorkerStats counts what one worker delivered.
type WorkerStats struct {
	// Batches counts the batches the worker made (its pipeline ran whole)
	// and sent. The single elements a worker ships for this client's part
	// of a cut pipeline (JobOptions.OffloadBoundary, offload auto) are
	// not batches: they count in Elements and CutElements, and the
	// batches this client made of them in Stats.Batches alone.
	Batches int64 `json:"batches"`
	// Elements counts the elements the worker sent: its batches' rows
	// and its cut elements.
	Elements int64 `json:"elements"`
	// CutElements counts those of Elements the worker sent one by one,
	// cut (0 for a job that is not cut).
	CutElements int64 `json:"cut_elements"`
	// Rows is Elements under its former name, kept for readers of "rows".
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// WireBytes is what those batches took on the network: unpadded,
	// compressed (JobOptions.Compression), headers included.
	WireBytes int64 `json:"wire_bytes"`
}

// Stats counts what the iterator delivered so far.
type Stats struct {
	Batches int64 `json:"batches"`
	Rows    int64 `json:"rows"`
	Bytes   int64 `json:"bytes"`
	// WireBytes is what the batches took on the network (see WorkerStats).
	WireBytes int64 `json:"wire_bytes"`
	// Workers are the workers that delivered to this iterator, each
	// since it first did: a worker that died or left stays listed.
	Workers map[string]WorkerStats `json:"workers"`
	// Serving is how many workers serve the job now, as the cluster last
	// reported (refreshed every HeartbeatInterval): assigned and neither
	// expired, drained nor dismissed by autoscaling; a consumer's local
	// worker counts as one.
	Serving int `json:"serving"`
	// Reconnects counts worker streams reopened after a failure. At most
	// once, the batches on their way on a stream that broke are lost
	// (exactly-once sends them again).
	Reconnects int64 `json:"reconnects"`
	// Reorder (order deterministic) is the reorder buffer's occupancy,
	// its peak and bound, and the next batch of the sequence; nil for
	// other jobs.
	Reorder *ReorderStats `json:"reorder,omitempty"`
	// Share (jobs with JobOptions.Share) are the job's sharing counters as
	// the workers last reported them: refreshed every HeartbeatInterval
	// and by ShareStats. Nil for jobs that do not share.
	Share *api.JobShareSummary `json:"share,omitempty"`
	// Rounds (coordinated jobs) counts the rounds delivered, FillerRounds
	// those of them delivered as an empty filler (exactly-once: the round
	// was lost with its worker), and SkippedRounds those skipped (their
	// worker died, dropped them, or had reached its end of data).
	Rounds        int64 `json:"rounds,omitempty"`
	FillerRounds  int64 `json:"filler_rounds,omitempty"`
	SkippedRounds int64 `json:"skipped_rounds,omitempty"`
	// JobState is the job's state as the cluster last reported it
	// (api.JobRunning, JobFinished, JobFailed), and JobFailure why it
	// failed. They are refreshed every HeartbeatInterval and once more
	// when the iteration ends.
	JobState   string `json:"job_state,omitempty"`
	JobFailure string `json:"job_failure,omitempty"`
	// NumSplits and SplitsLost (DYNAMIC jobs): the dataset's splits per
	// epoch, and how many splits the job lost, as the cluster last
	// reported them (refreshed as JobState). DYNAMIC is at most once
	// under failure: a split is lost when the worker that leased it was
	// declared dead, or restarted, before it reported the split finished
	// (which it does once its pipeline has read it); the elements of a
	// lost split that the worker had not sent are missing for good, as
	// are batches of finished splits still queued on the worker when it
	// died (docs/jobs/sharding-and-delivery.md). SplitsLost counts the whole
	// job's loss, not this iterator's alone.
	NumSplits  int64 `json:"num_splits,omitempty"`
	SplitsLost int64 `json:"splits_lost"`
	// LossCounted: the job is at-most-once and counts its loss exactly
	// (DYNAMIC without share, coordinated reads, take or skip;
	// docs/jobs/sharding-and-delivery.md), and ElementsLost is that count: the elements
	// its dead workers' splits emitted, or would have, that no consumer
	// received. Like SplitsLost it is the whole job's, as the cluster last
	// reported it; it is final once JobState is finished, which the end
	// of data waits for (Options.LossWait).
	LossCounted  bool  `json:"loss_counted,omitempty"`
	ElementsLost int64 `json:"elements_lost"`
	// WorkersDropped counts the workers this iterator dropped mid-stream:
	// declared dead before they had sent their end of data. At-most-once,
	// what such a worker had made and not yet sent is lost, beyond the
	// splits counted in SplitsLost (at most its task buffer and the
	// stream windows); exactly-once reads it again.
	WorkersDropped int64 `json:"workers_dropped,omitempty"`
	// Delivery is the job's guarantee (jobspec.ExactlyOnce, jobspec.AtMostOnce;
	// "" for OFF and STATIC jobs).
	Delivery string `json:"delivery,omitempty"`
	// Exact (exactly-once jobs) is the job's delivery counters as the
	// cluster last reported them (refreshed as JobState): splits of dead
	// workers read again, elements abandoned by consumers that left.
	Exact *api.ExactInfo `json:"exactly_once,omitempty"`
	// Autocache is the job's autocache points as of the last heartbeat:
	// what each does (cache, compute, profiling) and the recorded
	// decision's inputs (docs/jobs/autocache.md).
	Autocache []api.AutocacheInfo `json:"autocache,omitempty"`
	// DuplicatesDropped (exactly-once jobs) counts elements this iterator
	// received a second time; a batch made only of such elements is
	// dropped. A worker sends a batch again when the stream it went out on
	// broke before the consumer credited it back, so a few are expected
	// after a failure; a batch only partly received before is a bug, and
	// is logged as an error.
	DuplicatesDropped int64 `json:"duplicates_dropped,omitempty"`
	// The training loop's stall (stall.go): WaitSeconds is the time spent
	// inside Next waiting for a batch, StallFraction that time over the
	// loop's whole time since the first batch (waiting plus its own work
	// between Next calls), RecentStallFraction the same over the last
	// StallWindow batches, BatchTimeSeconds the mean time per batch (wait
	// plus work) over them, and ResultQueue the mean number of batches
	// already buffered when Next was called. A loop that is never
	// starved has a stall near 0 and a queue near the prefetch bound; a
	// stall near 1 means the mesh, not the model, sets the pace.
	WaitSeconds         float64 `json:"wait_seconds"`
	StallFraction       float64 `json:"stall_fraction"`
	RecentStallFraction float64 `json:"recent_stall_fraction"`
	BatchTimeSeconds    float64 `json:"batch_time_seconds"`
	ResultQueue         float64 `json:"result_queue"`
	// Offload is where the job's pipeline ran for this consumer, why, and
	// how fast (nil for Attach; see JobOptions.Offload).
	Offload *OffloadStats `json:"offload,omitempty"`
	// Warnings say what makes the job slower than it could be, as last
	// heard (each is also logged once, at WARN): a job with fewer splits
	// per epoch than workers serving it (a single-file source read
	// whole), whose extra workers idle.
	Warnings []string `json:"warnings,omitempty"`
}

// Stats returns what was delivered so far.
func (it *Iterator) Stats() Stats {
	it.mu.Lock()
	defer it.mu.Unlock()
	s := it.stats
	if it.stats.Exact != nil {
		x := *it.stats.Exact
		s.Exact = &x
	}
	if it.ledger != nil {
		s.DuplicatesDropped = it.ledger.duplicates()
	}
	if it.ord != nil {
		s.Reorder = it.ord.stats()
	}
	it.stall.fill(&s)
	it.off.fill(&s, time.Now())
	if it.stats.Share != nil {
		sh := *it.stats.Share
		sh.Workers = append([]api.WorkerShare(nil), sh.Workers...)
		sh.Unreachable = append([]string(nil), sh.Unreachable...)
		s.Share = &sh
	}
	s.Workers = make(map[string]WorkerStats, len(it.stats.Workers))
	for k, v := range it.stats.Workers {
		s.Workers[k] = v
	}
	s.Serving = serving(it.info)
	if w := fewSplits(it.info); w != "" {
		s.Warnings = append(s.Warnings, w)
	}
	return s
}

// fewSplits is the warning for a DYNAMIC or STATIC job with fewer splits
// per epoch than workers serving it, or "": a split is read by one
// worker, so the others idle (a source of one file read whole, say).
func fewSplits(info api.JobInfo) string {
	n := serving(info)
	if info.NumSplits <= 0 || int64(n) <= info.NumSplits || info.Options.Sharding == jobspec.Off {
		return ""
	}
	return fmt.Sprintf("job %q has %d split(s) per epoch and %d workers serving it: at most %d can work at once, the others idle; split the source finer (a range's split_size; for text and TFRecord files, split_bytes, which cuts a file into byte ranges; or more files)",
		info.Name, info.NumSplits, n, info.NumSplits)
}

// serving counts the workers of info that serve the job now.
func serving(info api.JobInfo) int {
	n := 0
	for _, w := range info.Workers {
		if !w.Expired && !w.Drained && !w.Dismissed {
			n++
		}
	}
	return n
}

// countDelivered counts a batch Next returns; entered is when Next was
// called and queued the batches buffered then.
func (it *Iterator) countDelivered(x item, entered time.Time, queued int) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.countOutLocked(x.b, x.size, x.wire, entered, queued)
	it.countShippedLocked(x)
}

// countOut counts a batch Next returns in the iterator's totals: Next was
// entered at entered with queued batches in the buffer.
func (it *Iterator) countOut(b Batch, size, wire int64, entered time.Time, queued int) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.countOutLocked(b, size, wire, entered, queued)
}

func (it *Iterator) countOutLocked(b Batch, size, wire int64, entered time.Time, queued int) {
	it.stall.record(entered, time.Now(), queued, b.Worker)
	it.stats.Batches++
	if it.info.Scale != nil && it.stats.Batches%StallWindow == 0 {
		// An autoscaling job steps its policy once per window of
		// batches, on the heartbeat that reports it: report each window
		// as it ends rather than at the next tick (HeartbeatInterval,
		// 1 s by default, is longer than a window of fast batches, and
		// each change costs three windows).
		it.kickHeartbeat()
	}
	it.stats.Rows += b.Rows()
	it.stats.Bytes += size
	it.stats.WireBytes += wire
}

// countShipped counts what a worker sent in its figures (Stats.Workers).
func (it *Iterator) countShipped(x item) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.countShippedLocked(x)
}

func (it *Iterator) countShippedLocked(x item) {
	ws := it.stats.Workers[x.b.Worker]
	if x.cut > 0 {
		// One element (pullCut checked), whatever its first tensor's
		// leading dimension: the batch was not made yet.
		ws.Elements++
		ws.CutElements++
	} else {
		ws.Batches++
		ws.Elements += x.b.Rows()
	}
	ws.Rows = ws.Elements
	ws.Bytes += x.size
	ws.WireBytes += x.wire
	it.stats.Workers[x.b.Worker] = ws
}

// countReconnect counts a stream reopened after a failure.
func (it *Iterator) countDropped() {
	it.mu.Lock()
	it.stats.WorkersDropped++
	it.mu.Unlock()
}

func (it *Iterator) countReconnect() {
	it.mu.Lock()
	it.stats.Reconnects++
	it.mu.Unlock()
}

// countRound counts a coordinated round handed to Next (a filler or not),
// or skipped.
func (it *Iterator) countRound(k roundCount) {
	it.mu.Lock()
	switch k {
	case roundSkipped:
		it.stats.SkippedRounds++
	case roundFiller:
		it.stats.FillerRounds++
		it.stats.Rounds++
	default:
		it.stats.Rounds++
	}
	it.mu.Unlock()
}

// roundCount is what countRound counts.
type roundCount int

const (
	roundDelivered roundCount = iota
	roundFiller
	roundSkipped
)
