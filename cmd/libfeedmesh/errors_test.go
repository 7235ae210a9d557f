package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/transport"
)

// TestKindOf: the Go client's errors, as they reach the library (wrapped
// by the client, or sent back by a node), map to their kinds.
func TestKindOf(t *testing.T) {
	wire := func(code *transport.Error, msg string) error {
		return fmt.Errorf("distribute %q: %w", "j", transport.Errorf(code, "%s", msg))
	}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, codeOK},
		{fmt.Errorf("iterator: %w", errClosed), codeClosed},
		{fmt.Errorf("resume: %w: truncated", client.ErrBadCheckpoint), codeBadCheckpoint},
		{&client.JobFinishedError{Job: "j"}, codeJobFinished},
		{fmt.Errorf("x: %w", &client.JobFinishedError{Job: "j"}), codeJobFinished},
		{fmt.Errorf("distribute \"j\": %w: offload_boundary 9: the pipeline has 4 ops", client.ErrOffloadOptions), codeInvalidArgument},
		{fmt.Errorf("%w: ops[0]: unknown", errSpec), codeInvalidSpec},
		{fmt.Errorf("%w: sharding", errArg), codeInvalidArgument},
		{wire(transport.ErrNotFound, `job "j" not found`), codeNotFound},
		{wire(transport.ErrNoQuorum, "not committed in time"), codeNoQuorum},
		{wire(transport.ErrNoLeader, "no leader"), codeNoQuorum},
		{wire(transport.ErrUnavailable, "x"), codeUnavailable},
		{wire(transport.ErrDeadline, "x"), codeUnavailable},
		{wire(transport.ErrInvalid, `job "j": dataset spec: bad`), codeInvalidSpec},
		{wire(transport.ErrInvalid, `job "j": enumerate splits: no file matches`), codeInvalidSpec},
		{wire(transport.ErrInvalid, "apply CreateJob at index 9: raftnode: command rejected by the state machine: "+fsm.ErrJobInUse.Error()+": 1 consumer attached"), codeJobInUse},
		{wire(transport.ErrInvalid, fsm.ErrJobInUse.Error()+": 1 consumer attached"), codeJobInUse},
		{wire(transport.ErrInvalid, "job exists with other options"), codeInvalidArgument},
		{wire(transport.ErrPermissionDenied, `job "j": files source: paths[0]: "/etc/shadow": not allowed`), codePermissionDenied},
		{wire(transport.ErrInternal, "boom"), codeOther},
		{context.DeadlineExceeded, codeUnavailable},
		{errors.New("worker n1: split 3: corrupt record"), codeOther},
	} {
		if got := kindOf(tc.err); got != tc.want {
			t.Errorf("kindOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if got := dialKind(errors.New("dial 127.0.0.1:1: timeout: no recent network activity")); got != codeUnavailable {
		t.Errorf("dialKind of a transport failure = %d, want unavailable", got)
	}
	if got := dialKind(transport.Errorf(transport.ErrInternal, "x")); got != codeOther {
		t.Errorf("dialKind of a node's answer = %d, want other", got)
	}
}

// TestJobInUseText: the text kindOfCode looks for is fsm's, which
// the node sends back inside an invalid_argument error.
func TestJobInUseText(t *testing.T) {
	if !strings.Contains(fsm.ErrJobInUse.Error(), jobInUseText) {
		t.Fatalf("fsm.ErrJobInUse reads %q, which lacks %q: update jobInUseText", fsm.ErrJobInUse, jobInUseText)
	}
}
