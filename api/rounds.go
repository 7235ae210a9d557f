package api

import "strings"

// Coordinated reads: a consumer opens one batch stream per round it wants
// (batch.OpenRequest.Extra carries a RoundRequest), and the worker that
// serves the round answers with one batch whose Header.Extra is a
// RoundHeader, or ends the stream.

// RoundSkipped starts the message of the stream end a worker sends for a
// round it will not serve (dropped, or the batch was already taken): the
// consumer skips the round. A clean end with no batch is the end of data.
const RoundSkipped = "coordinated: round not served"

// IsRoundSkipped reports whether a worker's end message says to skip the
// round (see RoundSkipped).
func IsRoundSkipped(msg string) bool { return strings.HasPrefix(msg, RoundSkipped) }

// RoundIdle starts the message of the stream end a worker sends for a
// round it fixed while it had no batch to give (exactly-once, waiting for
// a dead worker's splits): no consumer gets that round, unlike a
// RoundSkipped one, which others may have got. It starts with RoundSkipped,
// so a client that does not know it skips the round.
const RoundIdle = RoundSkipped + " by any consumer (the worker had no batch ready)"

// IsRoundIdle reports whether a worker's end message says no consumer gets
// the round (see RoundIdle).
func IsRoundIdle(msg string) bool { return strings.HasPrefix(msg, RoundIdle) }

// RoundRequest is the OpenRequest.Extra of a coordinated read: which round
// and which batch of its window the consumer wants.
type RoundRequest struct {
	Round int64 `cbor:"1,keyasint"`
	Index int   `cbor:"2,keyasint"`
}

// RoundHeader is the Header.Extra of a coordinated batch.
type RoundHeader struct {
	// Round and Index echo the request.
	Round int64 `cbor:"1,keyasint"`
	Index int   `cbor:"2,keyasint"`
	// Bucket is the bucket of every batch of the round.
	Bucket int `cbor:"3,keyasint"`
	// PaddedTokens is, per consumer index, the padded token count of its
	// batch in this round (rows × longest length).
	PaddedTokens []int64 `cbor:"4,keyasint"`
	// Tokens is the real (unpadded) token count of this batch.
	Tokens int64 `cbor:"5,keyasint"`
	// Filler: an empty batch padding out the final partial window.
	Filler bool `cbor:"6,keyasint,omitempty"`
}
