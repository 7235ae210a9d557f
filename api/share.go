package api

// Wire types of ephemeral sharing's counters (MethodShareStats), and the
// per-job summary `feedmesh jobs` shows.

// ShareStatsRequest asks a worker for its sharing counters.
type ShareStatsRequest struct {
	// Job limits the answer to one job; empty means every job.
	Job string `cbor:"1,keyasint,omitempty"`
}

// WorkerShareStats are one worker's sharing counters.
type WorkerShareStats struct {
	// Worker is the node's name.
	Worker string `cbor:"1,keyasint" json:"worker"`
	// WindowLimit is the byte bound of each of its windows
	// (WorkerConfig.ShareWindowBytes).
	WindowLimit int64 `cbor:"2,keyasint" json:"window_limit_bytes"`
	// Produced counts the batches its shared productions computed, since
	// the node started. Produced, Bytes and Windows are node-wide, every
	// tenant's: a worker answers them to administrators and nodes only
	// (0 to a tenant's client, which gets its jobs' counters in Jobs).
	Produced int64 `cbor:"3,keyasint" json:"produced"`
	// Bytes is what its windows retain now; Windows is how many exist
	// (one per dataset being shared, released with its last job).
	Bytes   int64 `cbor:"4,keyasint" json:"window_bytes"`
	Windows int   `cbor:"5,keyasint" json:"windows"`
	// Jobs are the sharing jobs with a task on the worker, sorted by name.
	Jobs []JobShareStats `cbor:"6,keyasint" json:"jobs"`
}

// JobShareStats are one job's sharing counters on one worker.
type JobShareStats struct {
	// Job is the job's name.
	Job string `cbor:"1,keyasint" json:"job"`
	// Read counts batches the job read from the window (Hits + Produced).
	Read int64 `cbor:"2,keyasint" json:"read"`
	// Hits counts batches another job's read had produced.
	Hits int64 `cbor:"3,keyasint" json:"hits"`
	// Produced counts the job's reads that caused production.
	Produced int64 `cbor:"4,keyasint" json:"produced"`
	// EvictedBeforeRead counts batches evicted before the job read them:
	// it lagged more than the window behind and skipped them.
	EvictedBeforeRead int64 `cbor:"5,keyasint" json:"evicted_before_read"`
	// WindowProduced and WindowBytes describe the window the job reads:
	// batches it produced so far, bytes it retains now (0 once the job
	// has left it).
	WindowProduced int64 `cbor:"6,keyasint" json:"window_produced"`
	WindowBytes    int64 `cbor:"7,keyasint" json:"window_bytes"`
}

// JobShareSummary sums a job's sharing counters over its workers.
type JobShareSummary struct {
	// Read, Hits, Produced and EvictedBeforeRead are the sums of the
	// JobShareStats fields of the same names over the job's workers.
	Read              int64 `json:"read"`
	Hits              int64 `json:"hits"`
	Produced          int64 `json:"produced"`
	EvictedBeforeRead int64 `json:"evicted_before_read"`
	// Workers are the per-worker figures, sorted by worker.
	Workers []WorkerShare `json:"workers"`
	// Unreachable lists workers that did not answer in time.
	Unreachable []string `json:"unreachable,omitempty"`
}

// WorkerShare is one worker's line in a JobShareSummary.
type WorkerShare struct {
	// Worker is the node's name.
	Worker string `json:"worker"`
	JobShareStats
}

// Add folds one worker's counters for the job into the summary.
func (s *JobShareSummary) Add(worker string, j JobShareStats) {
	s.Read += j.Read
	s.Hits += j.Hits
	s.Produced += j.Produced
	s.EvictedBeforeRead += j.EvictedBeforeRead
	s.Workers = append(s.Workers, WorkerShare{Worker: worker, JobShareStats: j})
}
