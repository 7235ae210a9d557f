package fsm

import (
	"fmt"
	"testing"
	"time"
)

// A detach is final: the consumer's heartbeat that reaches the log after
// its DetachConsumer (v2) does not attach it again, until the job's
// ConsumerTTL after the detach; v1 detaches keep their old meaning.
func TestDetachedConsumerStaysDetached(t *testing.T) {
	s := newJobState(t, &JobOptions{ConsumerTTL: 10, GCAfter: 100})
	applyOK(t, s, at(NewAttachConsumer("j1", "c1"), 2000))
	if got := applyOK(t, s, at(NewDetachConsumer("j1", "c1"), 2001)); got != true {
		t.Fatalf("detach: %v", got)
	}
	applyErr(t, s, at(NewAttachConsumer("j1", "c1"), 2002), ErrDetached)
	v, _ := s.Job("j1")
	if len(v.Consumers) != 0 || v.NoConsumersSince != 2001 || !v.gcDue(2101) {
		t.Fatalf("after the late attach: %+v", v)
	}
	applyOK(t, s, at(NewAttachConsumer("j1", "c2"), 2003)) // a new id is welcome

	// ExpireConsumers forgets the detach after ConsumerTTL ("before now" is strict).
	applyOK(t, s, NewExpireConsumers(2011))
	applyErr(t, s, at(NewAttachConsumer("j1", "c1"), 2011), ErrDetached)
	applyOK(t, s, NewExpireConsumers(2012))
	if v, _ := s.Job("j1"); v.Detached != nil {
		t.Fatalf("detached kept past the TTL: %v", v.Detached)
	}
	applyOK(t, s, at(NewAttachConsumer("j1", "c1"), 2013))

	// Version 1: the consumer could come back at once.
	v1 := at(NewDetachConsumer("j1", "c1"), 2014)
	v1.Version = 1
	applyOK(t, s, v1)
	applyOK(t, s, at(NewAttachConsumer("j1", "c1"), 2015))

	// Remembered detaches are bounded: the oldest is forgotten first.
	s = newJobState(t, &JobOptions{ConsumerTTL: time.Hour})
	for i := range maxJobConsumers + 1 {
		applyOK(t, s, at(NewDetachConsumer("j1", fmt.Sprintf("d%d", i)), int64(2000+i)))
	}
	if v, _ := s.Job("j1"); len(v.Detached) != maxJobConsumers {
		t.Fatalf("%d detached remembered, want %d", len(v.Detached), maxJobConsumers)
	}
	applyOK(t, s, at(NewAttachConsumer("j1", "d0"), 9000))
	applyErr(t, s, at(NewAttachConsumer("j1", "d1"), 9001), ErrDetached)

	// They survive a snapshot.
	applyErr(t, snapshotRoundTrip(t, s), at(NewAttachConsumer("j1", "d1"), 9002), ErrDetached)
}
