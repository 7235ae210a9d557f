package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// register-dataset fp=<fingerprint> splits=<n> [spec=<text>]
func handleRegisterDataset(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	fp, err := MustStr(d, "fp")
	if err != nil {
		return err
	}
	n, err := Int(d, "splits", 4)
	if err != nil {
		return err
	}
	v, err := e.Apply(fsm.NewRegisterDataset(fsm.Dataset{Fingerprint: fp, Spec: []byte(Str(d, "spec", "spec of "+fp)), NumSplits: n}))
	what := fmt.Sprintf("dataset %s, %d splits", fp, n)
	if isNew, _ := v.(bool); err == nil && !isNew {
		what += " (registered already)"
	}
	e.answer(out, what, err)
	return nil
}
