package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// attach job=<job> consumer=<id>
//
// AttachConsumer: the consumer joins the job, or renews its lease.
func handleAttach(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	job, consumer, err := jobAnd(d, "consumer")
	if err != nil {
		return err
	}
	v, err := e.Apply(fsm.NewAttachConsumer(job, consumer))
	exp, _ := v.(int64)
	e.answer(out, fmt.Sprintf("%s's lease runs until %s", consumer, at(exp)), err, job)
	return nil
}

// jobAnd reads job= and the named argument, both required.
func jobAnd(d *datadriven.TestData, key string) (job, v string, err error) {
	if job, err = MustStr(d, "job"); err != nil {
		return "", "", err
	}
	v, err = MustStr(d, key)
	return job, v, err
}
