package main

import (
	"strings"
	"testing"
)

func TestUnknownBenchmarkAndHelp(t *testing.T) {
	if _, errOut, code := runCmd(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown benchmark") {
		t.Fatalf("unknown benchmark: code %d %q", code, errOut)
	}
	if _, errOut, code := runCmd(t); code != 2 || !strings.Contains(errOut, "Usage: feedmesh-bench <name>") {
		t.Fatalf("no arguments: code %d %q", code, errOut)
	}
	_, errOut, code := runCmd(t, "--help")
	if code != 0 {
		t.Fatalf("--help: code %d %q", code, errOut)
	}
	for _, name := range []string{"cluster", "coordinated", "dynamic", "fanin", "recovery", "scaleout", "sharing", "splits", "transport", "tune"} {
		if _, ok := prog.Lookup(name); !ok || !strings.Contains(errOut, "  "+name+" ") {
			t.Errorf("benchmark %s is not registered or not listed by --help:\n%s", name, errOut)
		}
	}
	for _, name := range prog.Names() {
		if _, errOut, code := runCmd(t, name, "--help"); code != 0 || !strings.Contains(errOut, "Usage: feedmesh-bench "+name) {
			t.Errorf("%s --help: code %d, %q", name, code, errOut)
		}
	}
}

func TestScaleoutDeliveryFlag(t *testing.T) {
	if _, errOut, code := runCmd(t, "scaleout", "--delivery", "twice"); code == 0 || !strings.Contains(errOut, `--delivery: "twice" is not exactly-once, at-most-once or both`) {
		t.Fatalf("scaleout --delivery twice: code %d %q", code, errOut)
	}
}
