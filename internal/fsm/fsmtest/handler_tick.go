package fsmtest

import (
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"
)

// tick [d=<duration>]
//
// The proposers' clock moves on (1s by default).
func handleTick(e *Env, d *datadriven.TestData, out *strings.Builder) error {
	step, err := Duration(d, "d", time.Second)
	if err != nil {
		return err
	}
	e.Now = e.Now.Add(step)
	fmt.Fprintf(out, "%s\n", at(e.Now.UnixNano()))
	return nil
}
