package client

// OffloadProfile is what offload auto measured, in rows (elements) per
// second into the training loop.
type OffloadProfile struct {
	// Ingest is the training loop's rate with data always ready: rows
	// over the loop's own time between calls to Next.
	Ingest float64 `json:"ingest_rows_per_second"`
	// Local is the local worker's rate within the CPU budget, alone.
	Local float64 `json:"local_rows_per_second"`
	// Remote is the nodes' rate (0 until measured).
	Remote float64 `json:"remote_rows_per_second,omitempty"`
	// Rows is how many rows the profile measured.
	Rows int64 `json:"rows"`
}
