package api

import "github.com/feedmesh/feedmesh/pipeline"

// Wire types of the per-op pipeline statistics a worker keeps for its tasks
// (MethodOpStats): what `feedmesh diagnose --job` analyses and the status
// page draws.

// OpStatsRequest asks a worker for the per-op statistics of its tasks.
type OpStatsRequest struct {
	// Job limits the answer to one job; empty means every job.
	Job string `cbor:"1,keyasint,omitempty"`
}

// WorkerOpStats are one worker's per-op statistics, one entry per task.
type WorkerOpStats struct {
	// Worker is the node's name.
	Worker string `cbor:"1,keyasint" json:"worker"`
	// Cores is how many cores the node's Go runtime may use (GOMAXPROCS):
	// the budget a diagnosis of its pipelines allocates.
	Cores int `cbor:"2,keyasint" json:"cores"`
	// Tasks are the worker's tasks, sorted by job name.
	Tasks []TaskOpStats `cbor:"3,keyasint" json:"tasks"`
}

// TaskOpStats are the per-op statistics of the pipelines one task ran: a
// DYNAMIC exactly-once task may run several one after another (one per
// phase), an OFF or STATIC task one per epoch; the counts and times are
// their sums. A task of a sharing job reports the shared production it
// reads (the same figures for every job that shares it).
type TaskOpStats struct {
	Job string `cbor:"1,keyasint" json:"job"`
	// Seconds is the wall time the pipelines were open (summed): with the
	// ops' busy and stall times, what an analysis needs for rates.
	Seconds float64 `cbor:"2,keyasint" json:"seconds"`
	// Ops has the source first, then one entry per op of the spec.
	Ops []pipeline.OpStats `cbor:"3,keyasint" json:"ops"`
	// Bounding is the index in Ops of the op with the most stall (-1 when
	// nothing ran).
	Bounding int `cbor:"4,keyasint" json:"bounding"`
	// Batches counts the batches the task queued for its consumers, and
	// Queued how many of them wait for one now.
	Batches int64 `cbor:"5,keyasint" json:"batches"`
	Queued  int   `cbor:"6,keyasint" json:"queued"`
	// Ended: the task's production has ended.
	Ended bool `cbor:"7,keyasint" json:"ended"`
}

// OpStatsSum is the per-op statistics of a job's tasks on several workers
// summed into one worker pipeline's worth (SumOpStats): rates are per
// worker pipeline when divided by Seconds.
type OpStatsSum struct {
	Stats pipeline.Stats
	// Seconds sums the tasks' pipeline seconds; Batches their batches.
	Seconds float64
	Batches int64
	// Included lists the indices of the tasks summed; Idle counts those
	// that had run no pipeline yet (their batches still count) and
	// Mismatched those left out because their ops differ from the first
	// task's (a worker on another version of the spec).
	Included         []int
	Idle, Mismatched int
	// Cores is the smallest Cores among the included tasks' workers (0 if
	// none said).
	Cores int
}

// SumOpStats sums tasks; cores[i] is the GOMAXPROCS of tasks[i]'s worker.
func SumOpStats(tasks []TaskOpStats, cores []int) OpStatsSum {
	var out OpStatsSum
	for i, t := range tasks {
		out.Batches += t.Batches
		if len(t.Ops) == 0 || t.Seconds <= 0 {
			out.Idle++
			continue
		}
		sum, err := out.Stats.Sum(pipeline.Stats{Ops: t.Ops})
		if err != nil {
			out.Mismatched++
			continue
		}
		out.Stats = sum
		out.Seconds += t.Seconds
		out.Included = append(out.Included, i)
		if i < len(cores) && cores[i] > 0 && (out.Cores == 0 || cores[i] < out.Cores) {
			out.Cores = cores[i]
		}
	}
	return out
}
