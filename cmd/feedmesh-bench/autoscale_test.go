package main

import (
	"strings"
	"testing"
)

// TestBenchAutoscaleFlags: bad policies and tuned knobs are refused before
// any cluster starts, naming the flag.
func TestBenchAutoscaleFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"autoscale", "--policies", "fixed,bogus"}, "--policies"},
		{[]string{"autoscale", "--policies", "tuned", "--tuned-threshold", "2"}, "autoscale_threshold"},
		{[]string{"autoscale", "--policies", "tuned", "--tuned-pause", "-5"}, "autoscale_pause"},
		{[]string{"autoscale", "--repeat", "0"}, "--repeat"},
	} {
		if _, errOut, code := runCmd(t, tc.args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want a failure naming %s", tc.args, code, errOut, tc.want)
		}
	}
}
