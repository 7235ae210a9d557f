package fsm

import (
	"fmt"
)

// reportRoundBody is the body of TypeReportRound.
type reportRoundBody struct {
	Job   string `cbor:"1,keyasint"`
	Index int    `cbor:"2,keyasint"`
	Round int64  `cbor:"3,keyasint"`
}

// NewReportRound records that consumer index of the coordinated job has
// reached round (kept as the maximum of all reports for the index; the
// first report of any index starts the job's rounds). ErrUnknownJob for no
// such job; ErrInvalidCommand for a job that is not coordinated, an index
// outside [0, NumConsumers) or a round outside [0, 2^60]. Result: int64,
// the index's highest reported round.
func NewReportRound(job string, index int, round int64) Command {
	return newCommand(TypeReportRound, 1, reportRoundBody{Job: job, Index: index, Round: round})
}

func applyReportRound(s *State, c Command) (any, error) {
	var b reportRoundBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if j.Rounds == nil {
		return nil, fmt.Errorf("%w: job %q does not use coordinated reads", ErrInvalidCommand, b.Job)
	}
	if b.Index < 0 || b.Index >= j.Options.NumConsumers() {
		return nil, fmt.Errorf("%w: consumer index %d outside [0, %d)", ErrInvalidCommand, b.Index, j.Options.NumConsumers())
	}
	if b.Round < 0 || b.Round > maxRound {
		return nil, fmt.Errorf("%w: round %d outside [0, %d]", ErrInvalidCommand, b.Round, int64(maxRound))
	}
	r := j.Rounds
	if r.Reached == nil {
		r.Reached = map[int]int64{}
	}
	r.Reached[b.Index] = max(r.Reached[b.Index], b.Round)
	r.Started = true
	if len(r.Reached) == j.Options.NumConsumers() && len(r.Schedule.Changes) > 0 {
		low := r.Reached[0]
		for _, v := range r.Reached {
			low = min(low, v)
		}
		r.Schedule = r.Schedule.Compact(low)
	}
	return r.Reached[b.Index], nil
}
