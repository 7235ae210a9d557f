package worker

import (
	"testing"

	"github.com/feedmesh/feedmesh/api"
)

// TestLeaserLearnsCut: a job cut while a task runs (OffloadBody.Cut)
// reaches the splits the task has queued, though their lease said no cut:
// none of them is started, so they run cut. The next pipeline opens
// with the cut (NextCut).
func TestLeaserLearnsCut(t *testing.T) {
	cut := 0
	p := &Leaser{cfg: LeaseConfig{JobCut: func() int { return cut }}, queue: []leasedSplit{{id: 1}, {id: 2}}}
	p.learnCut()
	if p.NextCut() != 0 || p.queue[0].cut != 0 {
		t.Fatalf("no cut yet: NextCut %d, queue %+v", p.NextCut(), p.queue)
	}
	cut = 2
	if got := p.NextCut(); got != 2 {
		t.Fatalf("NextCut %d after the job was cut after 2, want 2", got)
	}
	for _, ls := range p.queue {
		if ls.cut != 2 {
			t.Fatalf("queued split %d still uncut after the job was cut: %+v", ls.id, p.queue)
		}
	}
	// Splits a lease brings later are cut too, whatever the lease said.
	p.enqueue(leaseAnswer(3))
	if p.queue[2].cut != 2 {
		t.Fatalf("split leased after the cut: %+v", p.queue[2])
	}
	// A lease saying so is enough when the local state lags.
	q := &Leaser{queue: []leasedSplit{{id: 1}}}
	q.enqueue(leaseAnswerCut(5, 2))
	if got := q.NextCut(); got != 5 || q.queue[0].cut != 5 {
		t.Fatalf("a lease cut after 5: NextCut %d, queue %+v", got, q.queue)
	}
}

func leaseAnswer(ids ...int64) api.LeaseResponse { return api.LeaseResponse{Splits: ids} }

func leaseAnswerCut(cut int, ids ...int64) api.LeaseResponse {
	return api.LeaseResponse{Splits: ids, Cut: cut}
}
