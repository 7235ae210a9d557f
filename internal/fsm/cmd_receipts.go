package fsm

import (
	"fmt"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/ranges"
)

// Receipt is one entry of a receiptsBody: elements of one split a
// consumer received.
type Receipt struct {
	Epoch int64      `cbor:"1,keyasint" json:"epoch"`
	Split int64      `cbor:"2,keyasint" json:"split"`
	Got   ranges.Set `cbor:"3,keyasint" json:"got"`
}

// receiptsBody is the body of TypeReceipts.
type receiptsBody struct {
	Job      string    `cbor:"1,keyasint"`
	Consumer string    `cbor:"2,keyasint"`
	Receipts []Receipt `cbor:"3,keyasint,omitempty"`
	// Fenced are expired workers the consumer has stopped reading from;
	// Receipts cover everything it took from them.
	Fenced []string `cbor:"4,keyasint,omitempty"`
	// Seq numbers the consumer's reports from 1; a report whose number
	// was applied already (sent again after its answer was lost) changes
	// nothing. 0: unnumbered.
	Seq uint64 `cbor:"5,keyasint,omitempty"`
}

// MaxReceipts bounds the entries of one Receipts command (and of one
// ProduceSplits), and MaxReceiptIntervals their intervals in total.
const (
	MaxReceipts         = 1 << 14
	MaxReceiptIntervals = jobspec.MaxReceiptIntervals
)

// NewReceipts reports, for an exactly-once DYNAMIC job, the elements
// consumer received since its last receipts, and the expired workers it
// fences (splits.DynamicState.Receive, Fence). The whole command applies or
// nothing does. Result: splits.Progress.
func NewReceipts(job, consumer string, seq uint64, receipts []Receipt, fenced []string) Command {
	return newCommand(TypeReceipts, 1, receiptsBody{Job: job, Consumer: consumer, Seq: seq, Receipts: receipts, Fenced: fenced})
}

func applyReceipts(s *State, c Command) (any, error) {
	var b receiptsBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	j, err := s.jobOf(b.Job)
	if err != nil {
		return nil, err
	}
	if err := checkName("consumer id", b.Consumer); err != nil {
		return nil, err
	}
	if j.Dynamic == nil || !j.Dynamic.Tracked() {
		return nil, fmt.Errorf("%w: job %q is not exactly-once DYNAMIC (receipts)", ErrNotDynamic, b.Job)
	}
	if len(b.Receipts) > MaxReceipts || len(b.Fenced) > maxJobWorkers {
		return nil, fmt.Errorf("%w: %d receipts, %d fences (limits %d, %d)", ErrInvalidCommand, len(b.Receipts), len(b.Fenced), MaxReceipts, maxJobWorkers)
	}
	intervals := 0
	for _, r := range b.Receipts {
		intervals += r.Got.Intervals()
		if err := j.Dynamic.CheckReceipt(r.Epoch, r.Split, r.Got); err != nil {
			return nil, fmt.Errorf("%w: job %q: %v", ErrInvalidCommand, b.Job, err)
		}
	}
	if intervals > MaxReceiptIntervals {
		return nil, fmt.Errorf("%w: %d receipt intervals, limit %d", ErrInvalidCommand, intervals, MaxReceiptIntervals)
	}
	for _, w := range b.Fenced {
		if err := checkName("worker id", w); err != nil {
			return nil, err
		}
	}
	// Report numbers are kept for attached consumers only, so that names
	// sent by anyone cannot grow the state; a consumer that is not (yet,
	// or any more) attached has its receipts applied unnumbered.
	seq := b.Seq
	if _, attached := j.Consumers[b.Consumer]; !attached {
		seq = 0
	}
	if !j.Dynamic.NewReport(b.Consumer, seq) {
		return j.Dynamic.Progress(), nil // applied before: its answer was lost
	}
	for _, r := range b.Receipts {
		if err := j.Dynamic.Receive(b.Consumer, r.Epoch, r.Split, r.Got); err != nil {
			// CheckReceipt passed, so this cannot happen; fail loudly
			// rather than leave half a command applied unnoticed.
			return nil, fmt.Errorf("job %q: receipts partly applied: %w", b.Job, err)
		}
	}
	for _, w := range b.Fenced {
		j.Dynamic.Fence(b.Consumer, w)
	}
	return j.Dynamic.Progress(), nil
}
