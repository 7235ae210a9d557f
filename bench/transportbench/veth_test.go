package transportbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		bits float64
	}{
		{"1gbit", 1e9}, {"500mbit", 500e6}, {"100mbit", 100e6}, {"2.5Gbit", 2.5e9},
		{" 1GBIT ", 1e9}, {"1gibit", 1 << 30}, {"100mbps", 800e6}, {"12.5MBps", 100e6},
		{"1000kbit", 1e6}, {"100gbit", 100e9},
	} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.bits {
			t.Errorf("ParseRate(%q) = %g, %v; want %g", tc.in, got, err, tc.bits)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "a number and a unit"},
		{"fast", "a number and a unit"},
		{"1000", "a number and a unit"}, // tc would read bits per second: ask for the unit
		{"gbit", "a number and a unit"},
		{"1gigabit", `unknown unit "gigabit"`},
		{"50%", `unknown unit "%"`},
		{"1.2.3gbit", "bad number"},
		{"-1gbit", "a number and a unit"},
		{"999kbit", "out of range"},
		{"101gbit", "out of range"},
	} {
		if _, err := ParseRate(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRate(%q): %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
}

func TestRootQdisc(t *testing.T) {
	for _, tc := range []struct{ show, kind, rate string }{
		{"", "noqueue", ""},
		{"qdisc noqueue 0: root refcnt 2 \n", "noqueue", ""},
		{"qdisc tbf 8001: root refcnt 3 rate 1Gbit burst 131000b lat 25ms \n", "tbf", "1Gbit"},
		{"qdisc netem 8002: root refcnt 2 limit 1000 rate 100Mbit\n", "netem", ""},
		{"qdisc fq_codel 0: parent :1 limit 10240p\nqdisc htb 1: root refcnt 2 r2q 10\n", "htb", ""},
	} {
		if kind, rate := rootQdisc(tc.show); kind != tc.kind || rate != tc.rate {
			t.Errorf("rootQdisc(%q) = %q, %q; want %q, %q", tc.show, kind, rate, tc.kind, tc.rate)
		}
	}
}

// TestVethScriptShapesAlike: scripts/veth.sh sets the same tbf as ShapeVeth.
func TestVethScriptShapesAlike(t *testing.T) {
	b, err := os.ReadFile("../../scripts/veth.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"TBF_BURST=" + tbfBurst + " TBF_LATENCY=" + tbfLatency, `root tbf rate "$1" burst "$TBF_BURST" latency "$TBF_LATENCY"`, "dev \"$TX_IF\"", "TX_IF=" + vethSend, "TX_NS=" + NSSend} {
		if !strings.Contains(s, want) {
			t.Errorf("scripts/veth.sh lacks %q", want)
		}
	}
}

func TestShapeVethRejectsBadRate(t *testing.T) {
	// The rate is checked before tc runs (so this runs anywhere).
	if _, _, err := ShapeVeth(context.Background(), "fast", new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), `rate "fast"`) {
		t.Errorf("ShapeVeth(fast): %v", err)
	}
}

// TestRowFields: the JSON rows always carry rate and wire_bytes_per_batch;
// the table names the rate in its heading and path column, and has a wire
// column in both its raw and text tables.
func TestRowFields(t *testing.T) {
	one := 1.0
	rows := []Row{
		{Path: Veth, Rate: "1gbit", Workload: WorkloadRaw, Transport: Feedmesh, Variant: "compress=lz4", BatchBytes: 1 << 20, Runs: 1, MBPerS: 100, WireBytesPerBatch: 1048630},
		{Path: Veth, Rate: "1gbit", Workload: WorkloadText, Transport: GRPCTLS, Variant: "default", BatchBytes: 12443, Runs: 1, WireBytesPerBatch: 12443, BatchesRatioVsGRPCTLS: &one},
		{Path: Veth, Rate: "1gbit", Workload: WorkloadText, Transport: Feedmesh, Variant: "compress=zstd", BatchBytes: 12443, Runs: 1, WireBytesPerBatch: 4171},
	}
	b, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back[0]["rate"] != "1gbit" || back[0]["wire_bytes_per_batch"] != 1048630.0 || back[2]["wire_bytes_per_batch"] != 4171.0 || back[2]["variant"] != "compress=zstd" {
		t.Errorf("JSON %s", b)
	}
	b, _ = json.Marshal(Row{Path: Loopback})
	if s := string(b); !strings.Contains(s, `"rate":""`) || !strings.Contains(s, `"wire_bytes_per_batch":0`) {
		t.Errorf("unshaped, failed row: %s", s)
	}

	var tb strings.Builder
	if err := WriteTable(&tb, rows); err != nil {
		t.Fatal(err)
	}
	out := tb.String()
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "rate limit 1gbit") {
		t.Errorf("table does not start with the rate:\n%s", out)
	}
	for _, want := range []string{"veth@1gbit", "feedmesh/compress=lz4", "1048630", "feedmesh/compress=zstd", "4171"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "WIRE B/BATCH"); n != 2 {
		t.Errorf("%d wire columns, want one per table:\n%s", n, out)
	}
	tb.Reset()
	rows[0].Rate, rows[1].Rate, rows[2].Rate, rows[0].Path, rows[1].Path, rows[2].Path = "", "", "", Loopback, Loopback, Loopback
	if err := WriteTable(&tb, rows); err != nil || strings.Contains(tb.String(), "rate") || strings.Contains(tb.String(), "@") {
		t.Errorf("unshaped table mentions a rate: %v\n%s", err, tb.String())
	}
}
