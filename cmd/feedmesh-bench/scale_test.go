package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchScaleFlags(t *testing.T) {
	for _, args := range [][]string{{"--nodes", "2"}, {"--consumers", "0"}, {"--gossip", "slow"}, {"--seconds", "0"}} {
		if _, errOut, code := runCmd(t, append([]string{"scale"}, args...)...); code != 2 || !strings.Contains(errOut, args[0]) {
			t.Errorf("scale %v: exit %d, %q", args, code, errOut)
		}
	}
}

// TestBenchScaleRow runs the smallest size and checks that every column
// of the cost model was measured: what a broken counter, label or
// profile parse would leave at zero.
func TestBenchScaleRow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	out, errOut, code := runCmd(t, "scale", "--nodes", "3", "--consumers", "2", "--seconds", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []scaleRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	r := rows[0]
	if r.Nodes != 3 || r.Consumers != 2 || r.Gossip != "default" || r.FormS <= 0 || r.JoinS <= 0 || r.RowsPerS <= 0 {
		t.Errorf("row: %+v", r)
	}
	// Exactly-once: each consumer heartbeats (AttachConsumer) and sends
	// receipts through Raft, via the leader's job.heartbeat and
	// job.receipts.
	if r.RaftByType["Receipts"] <= 0 || r.RaftByType["AttachConsumer"] <= 0 || r.RPCByMethod["job.receipts"] <= 0 || r.RPCByMethod["job.heartbeat"] <= 0 {
		t.Errorf("commands %v, requests %v", r.RaftByType, r.RPCByMethod)
	}
	// The profile split by node: the leader (which serves every
	// consumer's receipts) burned CPU, no more than the process did; a
	// follower of this small job may get no 10 ms sample in 2 s.
	if r.LeaderCPU <= 0 || r.FollowerCPU < 0 || r.LeaderCPU+r.FollowerCPU > r.ProcessCPU {
		t.Errorf("CPU leader %v, follower %v, process %v", r.LeaderCPU, r.FollowerCPU, r.ProcessCPU)
	}
	if r.GossipPktPerS <= 0 || r.GossipBytesPerS < r.GossipPktPerS {
		t.Errorf("gossip %v packets/s, %v B/s", r.GossipPktPerS, r.GossipBytesPerS)
	}
	if r.RTTP99MS <= 0 || r.RTTP99MS < r.RTTP50MS {
		t.Errorf("rtt p50 %v p99 %v", r.RTTP50MS, r.RTTP99MS)
	}
}

// TestBenchScaleFormOnly: --form-only gives one row per size with its
// formation and join times and no job.
func TestBenchScaleFormOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters")
	}
	out, errOut, code := runCmd(t, "scale", "--nodes", "3,4", "--consumers", "1,2", "--gossip", "scaled", "--form-only", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []scaleRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("want one row per size: %v: %s", err, out)
	}
	for i, r := range rows {
		if r.Nodes != 3+i || r.Gossip != "scaled" || r.FormS <= 0 || r.JoinS <= 0 || r.RowsPerS != 0 || r.RaftPerS != 0 {
			t.Errorf("row %d: %+v", i, r)
		}
	}
}
