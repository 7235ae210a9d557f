package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runBenchTransport(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"transport"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

func TestBenchTransportFlags(t *testing.T) {
	_, errOut, code := runBenchTransport("--help")
	if code != 0 || !strings.Contains(errOut, "Usage: feedmesh-bench transport") || !strings.Contains(errOut, "go build -o /tmp/fm-baseline") {
		t.Errorf("--help: code %d\n%s", code, errOut)
	}
	for _, f := range []string{"--workload", "-compress", "-rate", "rate (veth rate limit", "wire_bytes_per_batch", "encode=fresh"} {
		if !strings.Contains(errOut, f) {
			t.Errorf("--help does not document %s:\n%s", f, errOut)
		}
	}
	if strings.Contains(errOut, peerFlag) {
		t.Errorf("--help lists the hidden %s mode", peerFlag)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sizes", "1MiB"}, "--sizes"},
		{[]string{"--sizes", ","}, "no sizes"},
		{[]string{"--path", "wifi"}, "Path"},
		{[]string{"--runs", "0"}, "Runs"},
		{[]string{"--seconds", "0"}, "Seconds"},
		{[]string{"--transports", "udp"}, "unknown transport"},
		{[]string{"--sizes", "0"}, "size"},
		{[]string{"--workload", "images"}, "Workload"},
		{[]string{"--workload", "text", "--text-examples", "-1"}, "TextExamples"},
		{[]string{"--compress", "lz5"}, `--compress: compression "lz5": want one of none, lz4, zstd`},
		{[]string{"--compress", "lz4,gzip", "--levers"}, `compression "gzip"`},
		{[]string{"--rate", "1gbit"}, "--rate 1gbit needs --path veth"},
		{[]string{"--path", "loopback", "--rate", "100mbit"}, "needs --path veth"},
		{[]string{"--path", "veth", "--rate", "fast"}, `--rate: rate "fast": want a number and a unit`},
		{[]string{"--path", "veth", "--rate", "1gigabit"}, `unknown unit "gigabit"`},
		{[]string{"--path", "veth", "--rate", "10kbit"}, "out of range"},
	} {
		_, errOut, code := runBenchTransport(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, stderr %q; want an error naming %q", tc.args, code, errOut, tc.want)
		}
	}
	if _, errOut, code := runBenchTransport(peerFlag, "serve"); code == 0 || !strings.Contains(errOut, "send or recv") {
		t.Errorf("bad peer role: code %d, %q", code, errOut)
	}
}

func TestParseInts(t *testing.T) {
	got, err := parseInts(" 65536, 1048576 ,")
	if err != nil || len(got) != 2 || got[0] != 65536 || got[1] != 1048576 {
		t.Fatalf("parseInts: %v %v", got, err)
	}
	if joinInts(got) != "65536,1048576" {
		t.Errorf("joinInts: %q", joinInts(got))
	}
}
