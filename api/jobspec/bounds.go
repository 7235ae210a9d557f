package jobspec

import "time"

// Bounds of a job. They are constants, not config fields, because every
// replica of the state machine must accept or reject the same things, and
// a client must not build what the cluster will refuse.
const (
	// MaxEpochs bounds a job's epochs, and the epoch a checkpoint may
	// claim done before. (A job of an older log may repeat for ever: -1.)
	MaxEpochs = 1 << 20
	// MaxJobConsumers bounds the consumers attached to one job (and
	// Options.NumConsumers).
	MaxJobConsumers = 4096
	// MaxJobWorkers bounds the workers a job has ever been assigned (and
	// Options.MaxWorkers); the autoscaling policy's bound is the same.
	MaxJobWorkers = 4096
	// MaxRoundConsumers bounds the consumers of one round of a
	// coordinated job (Options.NumConsumers; api/rounds' MaxConsumers).
	MaxRoundConsumers = 256
	// MaxConsumerTTL and MaxGCAfter bound a job's durations.
	MaxConsumerTTL = 24 * time.Hour
	MaxGCAfter     = 30 * 24 * time.Hour
	// MaxOffloadBoundary bounds Options.OffloadBoundary (a cut after that
	// many ops).
	MaxOffloadBoundary = 1024
	// MaxCompressionName bounds Options.Compression.
	MaxCompressionName = 16
	// MaxAutoscaleMetrics bounds AutoscaleRevisit and AutoscalePause.
	MaxAutoscaleMetrics = 1000
	// MaxLocalCPUs bounds Options.LocalCPUs.
	MaxLocalCPUs = 4096
	// MaxReceiptIntervals bounds the intervals of one receipt, of one
	// produce entry, and of one checkpoint's Delivered.
	MaxReceiptIntervals = 1 << 16
	// MaxResumeParts bounds the checkpoints a resumed job waits for. Each
	// holds at most MaxReceiptIntervals intervals (and travels in one Raft
	// command).
	MaxResumeParts = 1024
	// MaxReceipts bounds the entries of one receipts request, and of one
	// produce report (a split each).
	MaxReceipts = 1 << 14
)
