package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// heartbeat renews the consumer's lease every HeartbeatInterval, and at
// once when kicked (kickHeartbeat), with the request the engine gives
// (engine.beat). Each answer becomes the job's info as last heard and is
// posted to beats, the newest replacing one the engine has not read yet. A
// failed heartbeat is logged and tried again at the next tick; a job that
// no longer exists ends the iteration, since no heartbeat will bring it
// back.
func (it *Iterator) heartbeat(beats chan api.JobInfo) {
	tick := time.NewTicker(it.c.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-it.ctx.Done():
			return
		case <-tick.C:
		case <-it.kick:
		}
		var info api.JobInfo
		req := it.eng.beat()
		req.Metrics = it.consumerMetrics()
		err := it.c.call(it.ctx, api.MethodHeartbeat, req, &info)
		switch {
		case it.ctx.Err() != nil:
			return
		case errors.Is(err, transport.ErrNotFound):
			it.fail(jobGone(it.job, err))
			return
		case err != nil:
			it.logger().Warn("heartbeat failed", "job", it.job, "err", err)
			continue
		}
		it.setInfo(info)
		select {
		case <-beats: // drop the unread older state
		default:
		}
		beats <- info
	}
}

// kickHeartbeat asks for a heartbeat now rather than at the next tick.
func (it *Iterator) kickHeartbeat() {
	select {
	case it.kick <- struct{}{}:
	default:
	}
}

// jobGone is the error that ends the iteration of a job the cluster no
// longer has.
func jobGone(job string, err error) error {
	return fmt.Errorf("job %q no longer exists (garbage-collected after it had no live consumer for its GCAfter?): %w", job, err)
}
