package fsm

import (
	"errors"
)

// Errors of the FSM. A command that fails with one of them was committed to
// the log but changed nothing; raftnode's Node.Apply also wraps its
// ErrRejected around them.
var (
	// ErrBadCommand: the entry or its body is not valid CBOR for its type.
	ErrBadCommand = errors.New("fsm: malformed command")
	// ErrUnknownType: no handler for the command's Type (a newer node's
	// command on an older node).
	ErrUnknownType = errors.New("fsm: unknown command type")
	// ErrUnknownVersion: the handler does not support the command's Version.
	ErrUnknownVersion = errors.New("fsm: unsupported command version")
	// ErrPanicked: applying the command panicked; it was rejected
	// (State.ApplyIndex), on every replica alike.
	ErrPanicked = errors.New("fsm: command panicked while it was applied; rejected")
	// ErrCommandTooLarge: the encoded command exceeds the configured
	// MaxCommandBytes (at raftnode's Node.Apply) or MaxCommandBytesLimit
	// (in the FSM).
	ErrCommandTooLarge = errors.New("fsm: command too large")
	// ErrInvalidCommand: the command decoded but its content is invalid
	// (an empty key, say).
	ErrInvalidCommand = errors.New("fsm: invalid command")
)

// Errors of the job commands; raftnode's Node.Apply wraps its ErrRejected
// around them, and errors.Is finds them through it.
var (
	// ErrUnknownJob: no job of that name (never created, or collected).
	ErrUnknownJob = errors.New("fsm: unknown job")
	// ErrUnknownDataset: no dataset of that fingerprint was registered.
	ErrUnknownDataset = errors.New("fsm: unknown dataset")
	// ErrMismatch: a dataset or job of that id exists with different
	// content; the message names the differences.
	ErrMismatch = errors.New("fsm: exists with different content")
	// ErrLimit: a job's NumConsumers or MaxWorkers, or one of the Max*
	// bounds of the state, would be exceeded.
	ErrLimit = errors.New("fsm: limit reached")
	// ErrNotAssigned: the worker has no live task for the job: never
	// assigned, or expired since, which is final (NewAssignTask).
	ErrNotAssigned = errors.New("fsm: worker not assigned to the job")
	// ErrNotDynamic: split leases exist only for DYNAMIC jobs.
	ErrNotDynamic = errors.New("fsm: job does not use dynamic sharding")
	// ErrJobInUse: GarbageCollectJob on a job with consumers, or before it
	// has been without consumers for its GCAfter.
	ErrJobInUse = errors.New("fsm: job still in use")
	// ErrPermission: a CreateJob whose owner is of another tenant than
	// the job of that name's.
	ErrPermission = errors.New("fsm: permission denied")
	// ErrDetached: AttachConsumer of a consumer that detached from the job
	// (DetachConsumer v2) within the job's ConsumerTTL: a heartbeat that
	// was still on its way when its consumer left.
	ErrDetached = errors.New("fsm: consumer detached from the job")
)

// ErrDismissed answers a lease from a worker that its job dismissed (its
// text, "released", is what older releases recorded in their logs): it
// hands back what it has not started and drains.
var ErrDismissed = errors.New("fsm: worker released from the job")

// ErrSnapshotFormat: the snapshot is malformed or of an unknown format.
var ErrSnapshotFormat = errors.New("fsm: bad snapshot")
