package fsm

import (
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// Bounds of the job state. Constants, not config fields: every replica must
// accept or reject a command identically.
const (
	// maxNameBytes bounds job names, consumer ids, worker ids and dataset
	// fingerprints.
	maxNameBytes = 256
	// maxSpecBytes bounds a dataset's encoded pipeline spec.
	maxSpecBytes = 4 << 20
	// maxDatasets and maxJobs bound how many datasets and jobs the state
	// holds at once.
	maxDatasets = 4096
	maxJobs     = 4096
	// maxJobConsumers bounds the consumers attached to one job (and
	// NumConsumers).
	maxJobConsumers = jobspec.MaxJobConsumers
	// maxJobWorkers bounds the workers a job has ever been assigned,
	// expired ones included (and MaxWorkers, StaticWorkers): the
	// autoscaling policy's bound, which is jobspec's (TestBoundsAgree).
	maxJobWorkers = autoscale.MaxWorkers
	// maxLeaseSplits is the most splits one LeaseSplits hands out; a larger
	// n is clamped to it.
	maxLeaseSplits = splits.MaxLease
	// maxFinishSplits bounds the split ids of one FinishSplits.
	maxFinishSplits = 1 << 16
	// maxConsumerTTL and maxGCAfter bound the job's durations.
	maxConsumerTTL = jobspec.MaxConsumerTTL
	maxGCAfter     = jobspec.MaxGCAfter
	// MaxFailureBytes bounds an EndTask's failure; NewEndTaskOfJob cuts
	// longer ones.
	MaxFailureBytes = 1024
)

// Defaults applied to zero JobOptions fields by CreateJob v1..v5 (since
// v6 the job's options come normalized: jobspec's defaults).
const (
	// defaultConsumerTTL is the consumer lease when JobOptions.ConsumerTTL
	// is 0. Clients renew (AttachConsumer again) well within it.
	defaultConsumerTTL = 30 * time.Second
	// DefaultGCAfter is how long a job without consumers lives when
	// JobOptions.GCAfter is 0.
	DefaultGCAfter = 5 * time.Minute
)

// checkName validates an id that names a job, consumer, worker or dataset.
func checkName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidCommand, what)
	}
	if len(name) > maxNameBytes {
		return fmt.Errorf("%w: %s of %d bytes, limit %d", ErrInvalidCommand, what, len(name), maxNameBytes)
	}
	return nil
}

// addSat adds d to t (Unix nanoseconds), saturating instead of wrapping.
func addSat(t int64, d time.Duration) int64 {
	s := t + int64(d)
	if d > 0 && s < t {
		return 1<<63 - 1
	}
	if d < 0 && s > t {
		return -1 << 63
	}
	return s
}

// timeDiff is a - b as a Duration, for messages.
func timeDiff(a, b int64) time.Duration { return time.Duration(a - b) }
