package raftstate

import (
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// CommandType selects the FSM handler of a Command. Values are part of the
// log format: never renumber or reuse one.
type CommandType uint16

// Command types. New commands (datasets, jobs, splits…) add a constant here
// and an entry in commandTable.
const (
	// TypePutKV sets a key (body: PutKV).
	TypePutKV CommandType = 1
	// TypeDeleteKV removes a key (body: DeleteKV).
	TypeDeleteKV CommandType = 2

	// Datasets and jobs (jobcmds.go). Each constructor documents its
	// command and its result.

	// TypeRegisterDataset: NewRegisterDataset (body: RegisterDatasetBody).
	TypeRegisterDataset CommandType = 10
	// TypeCreateJob: NewCreateJob (body: CreateJobBody).
	TypeCreateJob CommandType = 11
	// TypeAttachConsumer: NewAttachConsumer (body: ConsumerBody).
	TypeAttachConsumer CommandType = 12
	// TypeDetachConsumer: NewDetachConsumer (body: ConsumerBody).
	TypeDetachConsumer CommandType = 13
	// TypeExpireConsumers: NewExpireConsumers (body: ExpireConsumersBody).
	TypeExpireConsumers CommandType = 14
	// TypeAssignTask: NewAssignTask (body: AssignTaskBody).
	TypeAssignTask CommandType = 15
	// TypeLeaseSplits: NewLeaseSplits (body: LeaseSplitsBody).
	TypeLeaseSplits CommandType = 16
	// TypeFinishSplits: NewFinishSplits (body: FinishSplitsBody).
	TypeFinishSplits CommandType = 17
	// TypeExpireWorker: NewExpireWorker (body: WorkerBody).
	TypeExpireWorker CommandType = 18
	// TypeGarbageCollectJob: NewGarbageCollectJob (body: JobBody).
	TypeGarbageCollectJob CommandType = 19
	// TypeReportRound: NewReportRound (body: ReportRoundBody).
	TypeReportRound CommandType = 20
	// TypeEndTask: NewEndTask (body: EndTaskBody).
	TypeEndTask CommandType = 21
	// TypeProduceSplits: a worker emitted every element of splits of an
	// exactly-once DYNAMIC job (NewProduceSplits).
	TypeProduceSplits CommandType = 22
	// TypeReceipts: a consumer's receipts and fences for an exactly-once
	// DYNAMIC job (NewReceipts).
	TypeReceipts CommandType = 23
	// TypeHandBackSplits: a draining worker returns DYNAMIC splits it has
	// not started (NewHandBackSplits).
	TypeHandBackSplits CommandType = 24
	// TypeDrainTask: a worker drained its task before a graceful
	// shutdown, or a later process of it rejoins the job (NewDrainTask,
	// NewRejoinTask).
	TypeDrainTask CommandType = 25

	// TypePutKVIfAbsent sets a key unless it is set (body:
	// PutKVIfAbsent): the autocache decisions (kvifabsent.go).
	TypePutKVIfAbsent CommandType = 40
)

// String names the type for errors and logs.
func (t CommandType) String() string {
	if h, ok := commandTable[t]; ok {
		return h.name
	}
	return fmt.Sprintf("CommandType(%d)", uint16(t))
}

// Command is the envelope of every Raft log entry: a type, the schema
// version of its body, the proposer's clock, and the body as raw CBOR. The
// FSM dispatches on Type through commandTable and decodes Body with the
// handler for that (Type, Version).
//
// Determinism: a handler may use only what is in the command and the state.
// Ids are chosen by the proposer and put in the body; the one timestamp a
// command may need is At, set once before Apply (Node.Apply stamps it if
// zero), so every replica, replaying at any time, sees the same value.
type Command struct {
	// Version is the schema version of Body for this Type. A node that does
	// not know it (a newer node's command) rejects the command with an error
	// result; it never guesses.
	Version uint16 `cbor:"1,keyasint"`
	// Type selects the handler.
	Type CommandType `cbor:"2,keyasint"`
	// At is the proposer's wall clock in Unix nanoseconds, chosen before
	// Apply. Handlers use it instead of reading a clock.
	At int64 `cbor:"3,keyasint,omitempty"`
	// Body is the type-specific payload, CBOR-encoded.
	Body cbor.RawMessage `cbor:"4,keyasint"`
}

// Errors of the FSM. A command that fails with one of them was committed to
// the log but changed nothing; Node.Apply also wraps ErrRejected around them.
var (
	// ErrBadCommand: the entry or its body is not valid CBOR for its type.
	ErrBadCommand = errors.New("raftstate: malformed command")
	// ErrUnknownType: no handler for the command's Type (a newer node's
	// command on an older node).
	ErrUnknownType = errors.New("raftstate: unknown command type")
	// ErrUnknownVersion: the handler does not support the command's Version.
	ErrUnknownVersion = errors.New("raftstate: unsupported command version")
	// ErrCommandTooLarge: the encoded command exceeds the configured
	// MaxCommandBytes (at Node.Apply) or MaxCommandBytesLimit (in the FSM).
	ErrCommandTooLarge = errors.New("raftstate: command too large")
	// ErrInvalidCommand: the command decoded but its content is invalid
	// (an empty key, say).
	ErrInvalidCommand = errors.New("raftstate: invalid command")
)

var (
	// encMode is deterministic (sorted map keys, shortest forms), so the same
	// state always snapshots to the same bytes.
	encMode cbor.EncMode
	// decMode bounds what an entry can make us allocate and rejects
	// duplicate keys and unknown fields: a field this node does not know
	// means a newer schema, which must come with a new Version.
	decMode cbor.DecMode
)

func init() {
	var err error
	encMode, err = cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err) // static options: only a programming error gets here
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		MaxNestedLevels:   16,
		MaxArrayElements:  1 << 16,
		MaxMapPairs:       1 << 16,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// EncodeCommand encodes a command as a log entry.
func EncodeCommand(c Command) ([]byte, error) {
	b, err := encMode.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %v command: %w", c.Type, err)
	}
	return b, nil
}

// DecodeCommand decodes a log entry into its envelope. It checks the
// envelope only; the body is decoded by the handler. It never panics.
func DecodeCommand(data []byte) (Command, error) {
	var c Command
	if len(data) > MaxCommandBytesLimit {
		return c, fmt.Errorf("%w: %d bytes, limit %d", ErrCommandTooLarge, len(data), MaxCommandBytesLimit)
	}
	if err := decMode.Unmarshal(data, &c); err != nil {
		return Command{}, fmt.Errorf("%w: envelope: %v", ErrBadCommand, err)
	}
	if len(c.Body) == 0 {
		return Command{}, fmt.Errorf("%w: envelope without a body", ErrBadCommand)
	}
	return c, nil
}

// newCommand builds a command with a CBOR-encoded body. Bodies are plain
// structs of strings, byte slices and integers, which always encode.
func newCommand(t CommandType, version uint16, body any) Command {
	b, err := encMode.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("raftstate: encode %v body: %v", t, err)) // programming error
	}
	return Command{Version: version, Type: t, Body: b}
}

// decodeBody decodes a command body strictly.
func decodeBody(c Command, v any) error {
	if err := decMode.Unmarshal(c.Body, v); err != nil {
		return fmt.Errorf("%w: %v v%d body: %v", ErrBadCommand, c.Type, c.Version, err)
	}
	return nil
}
