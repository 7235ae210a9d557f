package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// delete key=<k>
//
// DeleteKV.
func handleDelete(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	k, err := MustStr(d, "key")
	if err != nil {
		return err
	}
	v, err := e.Apply(fsm.NewDeleteKV(k))
	e.answer(out, fmt.Sprintf("%s existed: %v", k, v), err)
	return nil
}
