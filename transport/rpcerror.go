package transport

import (
	"errors"
	"fmt"
)

// Error is the typed error an RPC carries over the wire. errors.Is(err,
// ErrNoQuorum) holds on the client for a server-side Errorf(ErrNoQuorum, ...):
// Is compares codes.
type Error struct {
	// Code is a stable, machine-readable reason, one of the sentinels' codes.
	Code string
	// Message is human-readable detail.
	Message string
}

// Error codes callers branch on.
var (
	// ErrNoLeader: the Raft group has no leader right now; retry later.
	ErrNoLeader = &Error{Code: "no_leader"}
	// ErrNoQuorum: the Raft group cannot commit (too few voters reachable).
	ErrNoQuorum = &Error{Code: "no_quorum"}
	// ErrNotFound: the named dataset, job or object does not exist.
	ErrNotFound = &Error{Code: "not_found"}
	// ErrInvalid: the request is malformed or its arguments are invalid.
	ErrInvalid = &Error{Code: "invalid_argument"}
	// ErrUnavailable: the peer could not be reached or the call could not complete.
	ErrUnavailable = &Error{Code: "unavailable"}
	// ErrUnknownMethod: the server has no handler for the method.
	ErrUnknownMethod = &Error{Code: "unknown_method"}
	// ErrPermissionDenied: the caller, as its certificate identifies it,
	// may not make this request.
	ErrPermissionDenied = &Error{Code: "permission_denied"}
	// ErrInternal: the handler failed for a reason without a code.
	ErrInternal = &Error{Code: "internal"}
	// ErrDeadline: the caller's deadline passed.
	ErrDeadline = &Error{Code: "deadline_exceeded"}
)

// Error returns "code: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an error with code's Code and a formatted message:
// transport.Errorf(transport.ErrNoQuorum, "no leader after %s", d).
func Errorf(code *Error, format string, args ...any) *Error {
	return &Error{Code: code.Code, Message: fmt.Sprintf(format, args...)}
}

// toWire turns a handler error into the *Error sent back: errors wrapping an
// *Error keep its code (and the full text as message), others become internal.
func toWire(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e == err {
			return &Error{Code: e.Code, Message: e.Message}
		}
		return &Error{Code: e.Code, Message: err.Error()}
	}
	return &Error{Code: ErrInternal.Code, Message: err.Error()}
}
