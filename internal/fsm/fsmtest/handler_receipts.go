package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// receipts job=<job> consumer=<id> [got=(split:lo-hi, ...)] [fence=(workers)]
// [epoch=<n>] [seq=<n>]
//
// Receipts: an exactly-once consumer reports the elements it received
// and fences expired workers it has stopped reading from. Each report of
// a consumer is numbered after its last, unless seq= repeats one (a
// report sent again).
func handleReceipts(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, consumer, err := jobAnd(d, "consumer")
	if err != nil {
		return err
	}
	ids, got, err := splitElems(d, "got")
	if err != nil {
		return err
	}
	epoch, err := Int(d, "epoch", 0)
	if err != nil {
		return err
	}
	key := job + "/" + consumer
	seq, err := Int(d, "seq", int64(e.seqs[key]+1))
	if err != nil {
		return err
	}
	e.seqs[key] = max(e.seqs[key], uint64(seq))
	var rs []fsm.Receipt
	var parts []string
	for _, s := range ids {
		rs = append(rs, fsm.Receipt{Epoch: epoch, Split: s, Got: got[s]})
		parts = append(parts, fmt.Sprintf("%d %v", s, got[s]))
	}
	fenced := List(d, "fence")
	for _, w := range fenced {
		parts = append(parts, "fence "+w)
	}
	_, err = e.Apply(fsm.NewReceipts(job, consumer, uint64(seq), rs, fenced))
	e.answer(out, fmt.Sprintf("report %d: %s", seq, strings.Join(parts, ", ")), err, job)
	return nil
}
