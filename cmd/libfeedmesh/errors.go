package main

import (
	"context"
	"errors"
	"strings"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/transport"
)

// Status codes of the C API (FM_* in the header, the same numbers in
// python/feedmesh/_lib.py). 0-3 are outcomes; 10 and above are errors,
// each a kind a caller may branch on, with the Go error's text as message.
const (
	codeOK      = 0 // FM_OK
	codeEnd     = 1 // FM_END: the iterator reached the end of the job's data
	codeTimeout = 2 // FM_TIMEOUT: no batch within the timeout; call again
	codeMore    = 3 // FM_MORE: fm_next_meta's buffer is too small for the batch's record; call again with one of meta[1] words

	codeOther            = 10 // FM_ERR_OTHER
	codeNotFound         = 11 // FM_ERR_NOT_FOUND: no such job (transport.ErrNotFound)
	codeNoQuorum         = 12 // FM_ERR_NO_QUORUM: the cluster cannot commit (no quorum, no leader)
	codeInvalidSpec      = 13 // FM_ERR_INVALID_SPEC: the dataset spec does not parse or validate
	codeJobInUse         = 14 // FM_ERR_JOB_IN_USE: a resume while the job still has consumers
	codeBadCheckpoint    = 15 // FM_ERR_BAD_CHECKPOINT: client.ErrBadCheckpoint
	codeClosed           = 16 // FM_ERR_CLOSED: a closed client or iterator, or a released batch
	codeInvalidArgument  = 17 // FM_ERR_INVALID_ARGUMENT: bad options, a bad address
	codeUnavailable      = 18 // FM_ERR_UNAVAILABLE: no node answered
	codeJobFinished      = 19 // FM_ERR_JOB_FINISHED: distribute (without resume) or attach of a job that has run to its end (client.ErrJobFinished)
	codePermissionDenied = 20 // FM_ERR_PERMISSION_DENIED: the cluster refused (transport.ErrPermissionDenied): a spec's path, URL or store the data-access policy does not allow, a request the caller may not make
)

// abiVersion is what fm_abi_version returns: the Python package refuses a
// library of another version (a stale build) instead of misreading its
// structs. Bump it whenever a C signature, struct or code changes.
const abiVersion = 4

// errClosed is the library's own "closed" condition: a handle that was
// closed or released (or never existed).
var errClosed = errors.New("closed")

// errSpec marks a dataset spec that does not parse or validate on this
// side.
var errSpec = errors.New("invalid dataset spec")

// errArg marks bad options or arguments found on this side.
var errArg = errors.New("invalid argument")

// jobInUseText is how fsm.ErrJobInUse reads once the node has sent
// it back as an invalid_argument error: the wire carries no code of its
// own for it, and the client must not link the state machine (internal/fsm) to compare errors.
// TestJobInUseText pins the text to fsm's.
const jobInUseText = "job still in use"

// kindOf maps an error of the Go client to a status code.
func kindOf(err error) int {
	var te *transport.Error
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, errClosed):
		return codeClosed
	case errors.Is(err, client.ErrBadCheckpoint):
		return codeBadCheckpoint
	case errors.Is(err, client.ErrJobFinished):
		return codeJobFinished
	case errors.Is(err, errSpec):
		return codeInvalidSpec
	case errors.Is(err, errArg), errors.Is(err, client.ErrOffloadOptions):
		return codeInvalidArgument
	case errors.As(err, &te):
		return kindOfCode(te)
	case errors.Is(err, context.DeadlineExceeded):
		return codeUnavailable
	}
	return codeOther
}

// kindOfCode maps an error the cluster answered with.
func kindOfCode(te *transport.Error) int {
	switch te.Code {
	case transport.ErrNotFound.Code:
		return codeNotFound
	case transport.ErrNoQuorum.Code, transport.ErrNoLeader.Code:
		return codeNoQuorum
	case transport.ErrUnavailable.Code, transport.ErrDeadline.Code:
		return codeUnavailable
	case transport.ErrPermissionDenied.Code:
		return codePermissionDenied
	case transport.ErrInvalid.Code:
		switch msg := te.Message; {
		case strings.Contains(msg, jobInUseText):
			return codeJobInUse
		case strings.Contains(msg, "dataset spec:"), strings.Contains(msg, "enumerate splits:"):
			// mesh.distributeLocal's words for a spec the leader cannot
			// decode, or whose files it cannot list.
			return codeInvalidSpec
		}
		return codeInvalidArgument
	}
	return codeOther
}

// dialKind maps an error of client.Dial: one that is not the cluster's
// answer means no node answered.
func dialKind(err error) int {
	var te *transport.Error
	if k := kindOf(err); k != codeOther || errors.As(err, &te) {
		return k
	}
	return codeUnavailable
}
