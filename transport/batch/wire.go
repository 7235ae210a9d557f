package batch

import (
	"errors"
	"fmt"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/fxamacker/cbor/v2"
)

// ErrMalformedBatch is wrapped by every decode and validation failure of a
// batch frame or of a stream message: a header that breaks the limits, a tail
// that disagrees with the metadata, a message of the wrong kind. A stream that
// produced it is unusable.
var ErrMalformedBatch = errors.New("malformed batch")

// RemoteError is the error a worker ended the stream with (Sender.End with a
// non-nil error), as returned by Receiver.Next.
type RemoteError struct {
	// Message is the worker's error text.
	Message string
}

// Error implements error.
func (e *RemoteError) Error() string { return "worker ended stream: " + e.Message }

// msgKind is the first field of every header on a batch stream.
type msgKind uint8

const (
	kindBatch  msgKind = 1 // worker → client: a batch (tail: tensor bytes)
	kindOpen   msgKind = 2 // client → worker: OpenRequest, first message
	kindCredit msgKind = 3 // client → worker: n more batches may be sent
	kindEnd    msgKind = 4 // worker → client: end of data or error, last message
	kindAccept msgKind = 5 // worker → client: the version, window and compression in force, first message
)

func (k msgKind) String() string {
	switch k {
	case kindBatch:
		return "batch"
	case kindOpen:
		return "open"
	case kindCredit:
		return "credit"
	case kindEnd:
		return "end"
	case kindAccept:
		return "accept"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// TensorMeta describes one tensor of a batch frame; its bytes are in the tail.
type TensorMeta struct {
	// Name is the tensor's name (valid UTF-8).
	Name string `cbor:"0,keyasint"`
	// DType is the element type.
	DType tensor.DType `cbor:"1,keyasint"`
	// Shape is the tensor's shape; empty for a scalar.
	Shape []int64 `cbor:"2,keyasint,omitempty"`
	// DataBytes is the length of the tensor's data in the tail.
	DataBytes int64 `cbor:"3,keyasint,omitempty"`
	// NumOffsets is the number of int64 offsets following the data of a Bytes
	// tensor (product(Shape)+1); 0 for other dtypes.
	NumOffsets int64 `cbor:"4,keyasint,omitempty"`
	// Lengths, when set, marks the tensor as sent unpadded (EncodeOptions.
	// Unpadded): it names the int32 [B] tensor of valid row lengths along
	// dimension 1, the tail holds each row's valid prefix back to back, and
	// the receiver pads the rows back to Shape[1] with PadBits.
	Lengths string `cbor:"5,keyasint,omitempty"`
	// PadBits is the little-endian bytes of one padding value.
	PadBits []byte `cbor:"6,keyasint,omitempty"`
	// Narrow, for an unpadded int32 or int64 tensor (EncodeOptions.Narrow),
	// is the width in bytes (1, 2, or for int64 also 4) its values are sent
	// in, as unsigned little-endian integers; the receiver widens them back
	// while it re-pads. 0: full width.
	Narrow uint8 `cbor:"7,keyasint,omitempty"`
}

// Header is the CBOR header of a batch frame.
type Header struct {
	// Seq is the batch's sequence number, chosen by whoever encodes the frame.
	// A worker serving one stream numbers its batches 0, 1, 2 …; a frame shared
	// by several streams (ephemeral sharing) carries the producer's number, so
	// a reader that missed evicted batches sees the gap.
	Seq uint64
	// Tensors describes the tail. Encode fills it from the element (a value
	// passed in is ignored); Decode returns it.
	Tensors []TensorMeta
	// Worker is the id of the node that produced the batch (provenance).
	Worker string
	// Epoch is the epoch the batch belongs to.
	Epoch int64
	// Prov is the batch's provenance: the source elements it holds, as
	// runs of element indices per (epoch, split) (see ProvRange and
	// AppendProv). Sorted by (Epoch, Split, Lo); within one (Epoch, Split)
	// the intervals are disjoint and not adjacent (merged); Lo >= 0,
	// Lo < Hi, Epoch >= 0, Split >= 0. Encode refuses and Decode rejects
	// anything else. Empty when the worker does not track provenance.
	Prov []ProvRange
	// Extra is room for later features (coordinated reads: round, bucket).
	Extra cbor.RawMessage `cbor:",omitempty"`
}

// OpenRequest is the first message a client sends on a data stream.
type OpenRequest struct {
	// Job names the job whose batches the client wants.
	Job string
	// Consumer identifies the client iterator (e.g. a consumer id or rank).
	Consumer string
	// Window is the credit granted up front: how many batches the worker may
	// send before the client grants more. At least 1; a worker clamps it to its
	// own maximum.
	Window int
	// Extra is room for later features.
	Extra cbor.RawMessage `cbor:",omitempty"`
	// Compression asks the worker to compress the batches it sends; its
	// Accept says the compression in force (the one asked for, or none).
	Compression Compression
	// JobID, when set, is the ID of the job as the client knows it: a
	// worker still running a task of a job since replaced under the same
	// name (a resume) starts the new one instead of serving the old.
	JobID uint64
	// Token, when set, is the client's access token: what it proves
	// decides whether the worker serves the job (mesh; the connection's
	// certificate otherwise).
	Token string
	// Capability is the consumer's capability, which the distribute or
	// attach that attached it answered: a worker of a mesh serves the
	// stream only with the capability of the Open's Consumer (mesh). A
	// secret: never logged.
	Capability []byte
}

// wireMsg is the header of every frame on a batch stream: one flat CBOR map
// with small integer keys, key 0 being the kind. Fields of other kinds are
// omitted; unknown keys are ignored, so fields can be added later.
type wireMsg struct {
	Kind msgKind `cbor:"0,keyasint"`

	// kindBatch
	Seq     uint64          `cbor:"1,keyasint,omitempty"`
	Tensors []TensorMeta    `cbor:"2,keyasint,omitempty"`
	Worker  string          `cbor:"3,keyasint,omitempty"`
	Epoch   int64           `cbor:"4,keyasint,omitempty"`
	Extra   cbor.RawMessage `cbor:"6,keyasint,omitempty"`
	// Prov is Header.Prov flattened, four integers a range: Epoch, Split,
	// Lo, Hi, Epoch, Split … (planTail checks the length and the order).
	// Key 23 is the last one-byte key, the largest the fast path reads.
	Prov []int64 `cbor:"23,keyasint,omitempty"`
	// Key 5 was Splits, a list of split ids nothing ever filled (so no
	// sender put it on the wire); it is not reused, and a header that
	// still carries it decodes with the key ignored, like any unknown key.

	// kindOpen
	Job       string          `cbor:"7,keyasint,omitempty"`
	Consumer  string          `cbor:"8,keyasint,omitempty"`
	Window    int             `cbor:"9,keyasint,omitempty"`
	OpenExtra cbor.RawMessage `cbor:"10,keyasint,omitempty"`
	// JobID: OpenRequest.JobID (read by the generic decoder: an Open
	// never takes the fast path).
	JobID uint64 `cbor:"24,keyasint,omitempty"`
	// Token: OpenRequest.Token (generic decoder too).
	Token string `cbor:"26,keyasint,omitempty"`
	// Capability: OpenRequest.Capability (generic decoder too).
	Capability []byte `cbor:"27,keyasint,omitempty"`
	// Keys 17 and 20 were flags of unversioned clients (WantAccept,
	// Widens); they are not reused, nor is 5 (see Prov).

	// kindOpen: the protocol version the client speaks. kindAccept: the
	// version in force (the Open's). kindEnd: set only when the worker
	// refuses the Open's version, with MinVersion: the versions it speaks.
	// See ProtocolVersion.
	Version    uint16 `cbor:"21,keyasint,omitempty"`
	MinVersion uint16 `cbor:"22,keyasint,omitempty"`

	// kindBatch: how the tail is compressed, and its length before (both
	// zero: uncompressed). kindOpen: the compression asked for. kindAccept:
	// the compression in force.
	Comp    Compression `cbor:"18,keyasint,omitempty"`
	RawTail int64       `cbor:"19,keyasint,omitempty"`

	// kindCredit
	Credits int64 `cbor:"11,keyasint,omitempty"`
	Grow    int64 `cbor:"15,keyasint,omitempty"` // raise the window by this much (clamped by the worker)

	// kindAccept (with Window: the window in force)
	MaxWindow int `cbor:"16,keyasint,omitempty"` // the worker's cap on the window

	// kindEnd
	Failed bool   `cbor:"12,keyasint,omitempty"` // the worker ended with an error
	Error  string `cbor:"13,keyasint,omitempty"` // its message
	Sent   uint64 `cbor:"14,keyasint,omitempty"` // batches sent on this stream before End
	// Paused: a clean end from a worker whose process drained (a
	// graceful shutdown): its next process may bring more of the job
	// (ErrPaused). A client that does not know the key reads a plain end.
	Paused bool `cbor:"25,keyasint,omitempty"`

	// names, when set, caches the strings of the headers a Receiver read
	// before, for DecodeHeader (not on the wire).
	names *fastNames
}

func (m *wireMsg) header() Header {
	return Header{Seq: m.Seq, Tensors: m.Tensors, Worker: m.Worker, Epoch: m.Epoch, Prov: provView(m.Prov), Extra: m.Extra}
}

// Limits bound what a decoder accepts from the network, on top of the codec's
// header and frame bounds. Zero fields take the DefaultLimits value.
type Limits struct {
	// MaxTensors bounds the tensors of one batch.
	MaxTensors int
	// MaxDims bounds the rank of one tensor.
	MaxDims int
	// MaxNameBytes bounds the length of a tensor name.
	MaxNameBytes int
	// MaxProvRanges bounds the provenance ranges (Header.Prov) one batch
	// header may carry. The header bound (transport.Config.MaxHeaderBytes)
	// bounds them too: a range takes 4 to 36 bytes of header.
	MaxProvRanges int
	// MaxUnpaddedBytes bounds the padded size an unpadded tensor may expand
	// to on the receiver (its tail bytes are bounded by the frame size, its
	// padding is not).
	MaxUnpaddedBytes int64
}

// DefaultLimits returns limits generous for real batches and small enough to
// keep a hostile header cheap to reject.
func DefaultLimits() Limits {
	return Limits{MaxTensors: 256, MaxDims: 16, MaxNameBytes: 256, MaxProvRanges: 16384, MaxUnpaddedBytes: 256 << 20}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxTensors <= 0 {
		l.MaxTensors = d.MaxTensors
	}
	if l.MaxDims <= 0 {
		l.MaxDims = d.MaxDims
	}
	if l.MaxNameBytes <= 0 {
		l.MaxNameBytes = d.MaxNameBytes
	}
	if l.MaxProvRanges <= 0 {
		l.MaxProvRanges = d.MaxProvRanges
	}
	if l.MaxUnpaddedBytes <= 0 {
		l.MaxUnpaddedBytes = d.MaxUnpaddedBytes
	}
	return l
}

// malformed returns an error wrapping ErrMalformedBatch.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedBatch, fmt.Sprintf(format, args...))
}
