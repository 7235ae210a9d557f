package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/testcluster"
)

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestMembersAndStatusJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, 3)
	addr := c.Node(1).Addr()

	out, errOut, code := runCmd(t, "members", "--addr", addr, "--json")
	if code != 0 {
		t.Fatalf("members exited %d: %s", code, errOut)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	n, leaders := 0, 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		for _, f := range []string{"name", "gossip_addr", "addr", "status", "raft"} {
			if s, ok := m[f].(string); !ok || s == "" {
				t.Errorf("member %v: field %q missing", m, f)
			}
		}
		if m["status"] != "alive" {
			t.Errorf("member %v not alive", m["name"])
		}
		if m["raft"] == "leader" {
			leaders++
		}
		n++
	}
	if n != 3 || leaders != 1 {
		t.Fatalf("members: %d lines, %d leaders; want 3 and 1\n%s", n, leaders, out)
	}

	// Under load, leadership can move between the status call and the
	// check (c.Leader is nil while no node, or two, believe they lead), and
	// a node's view of the configuration can lag (voters [] seen at load
	// 9): ask again until status names the leader the cluster agrees on
	// and its 3 voters (WaitFor fails the test if it never does).
	var st map[string]any
	c.WaitFor(t, 10*time.Second, "status to name the leader", func() bool {
		out, errOut, code := runCmd(t, "status", "--addr", c.Node(2).Addr(), "--json")
		if code != 0 {
			t.Fatalf("status exited %d: %s", code, errOut)
		}
		st = nil
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status output %q: %v", out, err)
		}
		_, l := c.Leader()
		vs, _ := st["voters"].([]any)
		return l != nil && st["leader"] == l.Name() && len(vs) == 3
	})
	if term, ok := st["term"].(float64); !ok || term < 1 {
		t.Errorf("status term %v", st["term"])
	}

	out, _, code = runCmd(t, "status", "--addr", addr)
	if code != 0 || !strings.Contains(out, "leader:") {
		t.Fatalf("status table: code %d\n%s", code, out)
	}
}

func TestFlagsFromEnvironment(t *testing.T) {
	t.Setenv("FEEDMESH_ADDR", "127.0.0.1:1")
	t.Setenv("FEEDMESH_TIMEOUT", "not-a-duration")
	_, errOut, code := runCmd(t, "members")
	if code == 0 || !strings.Contains(errOut, "FEEDMESH_TIMEOUT") {
		t.Fatalf("bad env var not reported: code %d, %q", code, errOut)
	}
}

func TestUnknownCommandAndHelp(t *testing.T) {
	if _, errOut, code := runCmd(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: code %d %q", code, errOut)
	}
	for _, args := range [][]string{{"bench"}, {"bench", "transport", "--workload", "text"}} {
		if _, errOut, code := runCmd(t, args...); code != 2 || !strings.Contains(errOut, "feedmesh-bench") {
			t.Errorf("%v: code %d %q; want 2 and a pointer to feedmesh-bench", args, code, errOut)
		}
	}
	if _, errOut, _ := runCmd(t, "--help"); !strings.Contains(errOut, "feedmesh-bench") {
		t.Errorf("--help does not point to feedmesh-bench: %q", errOut)
	}
	for _, name := range prog.Names() {
		if _, errOut, code := runCmd(t, name, "--help"); code != 0 || !strings.Contains(errOut, "Usage: feedmesh "+name) {
			t.Errorf("%s --help: code %d, %q", name, code, errOut)
		}
	}
}

// The README's first quick-start command must keep working.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	out, errOut, code := runCmd(t, "demo", "--elements", "20000")
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"cluster formed", "killing the leader", "new leader", "job done"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestNodeLimitFlags: the node's transport limits and drain timeout are
// flags; a bad value is refused at start with the config field named.
func TestNodeLimitFlags(t *testing.T) {
	for flag, field := range map[string]string{
		"--max-conns=0":                "MaxIncomingConns",
		"--max-conns-per-addr=-1":      "MaxConnsPerAddr",
		"--max-rpc-streams-per-conn=0": "MaxRPCStreamsPerConn",
		"--max-receive-window=0":       "MaxReceiveWindowBytes",
		"--initial-receive-window=8":   "InitialReceiveWindow",
		"--drain-timeout=-1s":          "DrainTimeout",
	} {
		_, errOut, code := runCmd(t, "node", "--data-dir", t.TempDir(), "--port", "0", "--gossip-port", "0", flag)
		if code == 0 || !strings.Contains(errOut, field) {
			t.Errorf("%s: exit %d, %q: want a refusal naming %s", flag, code, errOut, field)
		}
	}
}

// TestNodePolicyFlag: a --policy file that does not parse, or does not
// exist, stops the node at start with what is wrong.
func TestNodePolicyFlag(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(bad, []byte("roles: {r: {jobs: [a-*]}}\nbindings: [{tenant: vision, roles: [nope]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		bad: `no role named "nope"`,
		filepath.Join(t.TempDir(), "missing.yaml"): "--policy",
	} {
		_, errOut, code := runCmd(t, "node", "--data-dir", t.TempDir(), "--port", "0", "--gossip-port", "0", "--policy", file)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("--policy %s: exit %d, %q: want a refusal saying %q", file, code, errOut, want)
		}
	}
}
