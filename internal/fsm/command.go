package fsm

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// Command is the envelope of every Raft log entry: a type, the schema
// version of its body, the proposer's clock, and the body as raw CBOR. The
// FSM dispatches on Type through commandTable and decodes Body with the
// handler for that (Type, Version).
//
// Determinism: a handler may use only what is in the command and the state.
// Ids are chosen by the proposer and put in the body; the one timestamp a
// command may need is At, set once before Apply (raftnode's Node.Apply
// stamps it if zero), so every replica, replaying at any time, sees the
// same value.
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
	// The decoder checks the body is well-formed CBOR; the encoder also
	// checks built-in tags' contents (a bignum tag must wrap a byte
	// string). A body only the decoder accepts could be applied but not
	// encoded again (in a Quota wrapper, a log dump): refuse it here.
	if _, err := encMode.Marshal(c.Body); err != nil {
		return Command{}, fmt.Errorf("%w: body: %v", ErrBadCommand, err)
	}
	return c, nil
}

// newCommand builds a command with a CBOR-encoded body. Bodies are plain
// structs of strings, byte slices and integers, which always encode.
func newCommand(t CommandType, version uint16, body any) Command {
	b, err := encMode.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("fsm: encode %v body: %v", t, err)) // programming error
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

// MaxCommandBytesLimit caps MaxCommandBytes and is the FSM's own fixed bound
// on a log entry: Raft entries are replicated to every voter and kept in the
// log, so anything larger belongs elsewhere.
const MaxCommandBytesLimit = 64 << 20
