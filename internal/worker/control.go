package worker

import (
	"context"
	"errors"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// Control is the cluster's control plane as a lease loop sees it. Each
// call is answered on the Raft leader; a node forwards it there, a client
// sends it to a node. An error that Retriable calls final says what the
// cluster decided (api.ErrNotAssigned, api.ErrDismissed,
// api.ErrHandBackRefused, transport.ErrInvalid …).
type Control interface {
	Lease(ctx context.Context, req api.LeaseRequest) (api.LeaseResponse, error)
	Finish(ctx context.Context, req api.FinishRequest) error
	Produce(ctx context.Context, req api.ProduceRequest) error
	HandBack(ctx context.Context, req api.HandBackRequest) error
}

// Gate holds a worker to its share of a job: the client's local worker
// may prepare only a fraction of what its consumer receives. A nil Gate
// holds nothing back.
type Gate interface {
	// Open reports whether the worker may lease ahead now.
	Open() bool
	// Wait returns once the worker may lease; ErrJobEnded if the job
	// ended while it waited.
	Wait(ctx context.Context) error
	// Busy says whether the worker holds splits to read.
	Busy(bool)
}

// ErrJobEnded is what Gate.Wait returns when the job ended while the
// worker waited for its share: its part ends without asking again.
var ErrJobEnded = errors.New("the job ended")

// Retriable reports whether a failed control call may succeed when sent
// again unchanged (no leader for a while, a node unreachable): not when
// the cluster refused it for good.
func Retriable(err error) bool {
	switch {
	case errors.Is(err, api.ErrNotAssigned), errors.Is(err, api.ErrHandBackRefused), errors.Is(err, api.ErrDismissed),
		errors.Is(err, transport.ErrInvalid), errors.Is(err, transport.ErrNotFound), errors.Is(err, transport.ErrUnknownMethod):
		return false
	}
	return true
}
