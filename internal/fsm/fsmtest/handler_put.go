package fsmtest

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// put key=<k> value=<v> [if-absent]
//
// PutKV, or PutKVIfAbsent: the first proposal wins.
func handlePut(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	k, err := MustStr(d, "key")
	if err != nil {
		return err
	}
	val := []byte(Str(d, "value", ""))
	c := fsm.NewPutKV(k, val)
	if Flag(d, "if-absent") {
		c = fsm.NewPutKVIfAbsent(k, val)
	}
	_, err = e.Apply(c)
	e.answer(out, fmt.Sprintf("%s=%s", k, e.State.KV[k]), err)
	return nil
}
