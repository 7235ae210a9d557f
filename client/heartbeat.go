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
			if err := it.unavailable(err); err != nil {
				it.fail(err)
				return
			}
			continue
		case it.jobID != 0 && info.ID != 0 && info.ID != it.jobID:
			it.fail(jobReplaced(it.job, it.jobID, info))
			return
		}
		it.heard()
		it.setInfo(info)
		select {
		case <-beats: // drop the unread older state
		default:
		}
		beats <- info
	}
}

// heard notes a word from the cluster (a heartbeat answered, a batch
// received): Options.UnavailableTimeout counts from the last.
func (it *Iterator) heard() { it.lastHeard.Store(time.Now().UnixNano()) }

// unavailable is the error that ends the iteration when the cluster has
// said nothing for Options.UnavailableTimeout (hb: the last heartbeat's
// error), or nil.
func (it *Iterator) unavailable(hb error) error {
	limit := it.c.opts.UnavailableTimeout
	if limit < 0 {
		return nil
	}
	quiet := time.Since(time.Unix(0, it.lastHeard.Load()))
	if quiet < limit {
		return nil
	}
	it.unreachable.Store(true)
	kind, what := transport.ErrUnavailable, "no node of the cluster answered"
	if !unreachable(hb) {
		kind, what = transport.ErrNoQuorum, "the cluster's nodes answered, but it could not commit (no quorum)"
	}
	return fmt.Errorf("job %q: %w: %s and no batch came for %v (Options.UnavailableTimeout, %v; Python unavailable_timeout, None for ever); the last heartbeat: %v",
		it.job, kind, what, quiet.Round(time.Second), limit, hb)
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

// ErrFenced is wrapped by Next's error when the job this consumer read
// was replaced under it: resumed from a checkpoint by another process
// (which fences the consumers still attached: a preempted trainer's
// restart does not wait for the dead one's lease), or collected after
// this consumer's lease expired and created anew.
var ErrFenced = errors.New("this consumer was fenced: the job it read was replaced")

// jobReplaced is the error that ends the iteration of a consumer whose job
// (ID was) the cluster replaced by now's.
func jobReplaced(job string, was uint64, now api.JobInfo) error {
	why := "created anew (this consumer's lease had expired and the job was collected)"
	if x := now.Exact; x != nil && x.ResumeFrom == was {
		why = "resumed from a checkpoint of it by another process (a restarted trainer), which fenced this consumer"
	}
	return fmt.Errorf("job %q: %w: it was %s; this iteration cannot go on (a consumer of the resumed job resumes from its own checkpoint)", job, ErrFenced, why)
}
