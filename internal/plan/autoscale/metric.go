package autoscale

import (
	"fmt"
	"math"
)

// Metric is one report of a job's consumer (its heartbeat carries
// it; the state machine keeps each consumer's last in its job).
type Metric struct {
	// BatchTime is the time to get and process a batch, averaged over the
	// last BatchesPerMetric batches (seconds).
	BatchTime float64 `cbor:"1,keyasint" json:"batch_time"`
	// ResultQueue is the batches buffered in the consumers, waiting for
	// the model (averaged over the same batches).
	ResultQueue float64 `cbor:"2,keyasint" json:"result_queue"`
	// Stall is the share of the training loop's time spent waiting for
	// data over the same batches; Batches the batches the consumer has
	// received in all.
	Stall   float64 `cbor:"3,keyasint,omitempty" json:"stall"`
	Batches int64   `cbor:"4,keyasint,omitempty" json:"batches"`
	// Workers is how many workers delivered the window's batches (0:
	// not reported).
	Workers int `cbor:"5,keyasint,omitempty" json:"workers,omitempty"`
}

// Validate rejects a metric no consumer can have measured.
func (m Metric) Validate() error {
	ok := func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }
	if !ok(m.BatchTime) || !ok(m.ResultQueue) || !ok(m.Stall) || m.Stall > 1 || m.Batches < 0 || m.Workers < 0 || m.Workers > MaxWorkers {
		return fmt.Errorf("consumer metric %+v: want finite batch time, queue and batches >= 0, a stall in [0, 1] and workers in [0, %d]", m, MaxWorkers)
	}
	return nil
}
