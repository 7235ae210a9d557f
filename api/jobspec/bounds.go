package jobspec

// Bounds of a job. They are constants, not config fields, because every
// replica of the state machine must accept or reject the same things, and
// a client must not build what the cluster will refuse.
const (
	// MaxEpochs bounds a job's epochs (0 or -1, repeat forever, is always
	// allowed), and the epoch a checkpoint may claim done before.
	MaxEpochs = 1 << 20
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
