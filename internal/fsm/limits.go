package fsm

import (
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/internal/plan/autoscale"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// Bounds of the job state. Constants, not config fields: every replica must
// accept or reject a command identically.
const (
	// MaxNameBytes bounds job names, consumer ids, worker ids and dataset
	// fingerprints.
	MaxNameBytes = 256
	// MaxSpecBytes bounds a dataset's encoded pipeline spec.
	MaxSpecBytes = 4 << 20
	// MaxDatasets and MaxJobs bound how many datasets and jobs the state
	// holds at once.
	MaxDatasets = 4096
	MaxJobs     = 4096
	// MaxJobConsumers bounds the consumers attached to one job (and
	// JobOptions.NumConsumers).
	MaxJobConsumers = 4096
	// MaxJobWorkers bounds the workers a job has ever been assigned,
	// expired ones included (and JobOptions.MaxWorkers, StaticWorkers).
	MaxJobWorkers = autoscale.MaxWorkers
	// MaxLeaseSplits is the most splits one LeaseSplits hands out; a larger
	// n is clamped to it.
	MaxLeaseSplits = splits.MaxLease
	// MaxFinishSplits bounds the split ids of one FinishSplits.
	MaxFinishSplits = 1 << 16
	// MaxConsumerTTL and MaxGCAfter bound the job's durations.
	MaxConsumerTTL = 24 * time.Hour
	MaxGCAfter     = 30 * 24 * time.Hour
	// MaxFailureBytes bounds an EndTask's failure; NewEndTask cuts
	// longer ones.
	MaxFailureBytes = 1024
)

// Defaults applied to zero JobOptions fields by CreateJob.
const (
	// DefaultConsumerTTL is the consumer lease when JobOptions.ConsumerTTL
	// is 0. Clients renew (AttachConsumer again) well within it.
	DefaultConsumerTTL = 30 * time.Second
	// DefaultGCAfter is how long a job without consumers lives when
	// JobOptions.GCAfter is 0.
	DefaultGCAfter = 5 * time.Minute
)

// checkName validates an id that names a job, consumer, worker or dataset.
func checkName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidCommand, what)
	}
	if len(name) > MaxNameBytes {
		return fmt.Errorf("%w: %s of %d bytes, limit %d", ErrInvalidCommand, what, len(name), MaxNameBytes)
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
