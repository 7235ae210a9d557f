package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/testcluster"
)

// recover refuses what it must not touch, with a message saying why.
func TestRecoverRefuses(t *testing.T) {
	dir := t.TempDir()
	notNode := filepath.Join(dir, "empty")
	nonvoter := filepath.Join(dir, "nonvoter")
	for _, d := range []string{notNode, nonvoter} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(nonvoter, "node-name"), []byte("n9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no data dir", nil, 2, "give the data dir"},
		{"stray argument", []string{"--data-dir", nonvoter, "extra"}, 2, "unexpected arguments"},
		{"missing dir", []string{"--data-dir", filepath.Join(dir, "nope")}, 1, "no such file"},
		{"not a data dir", []string{"--data-dir", notNode}, 1, "not a node's data dir"},
		{"no raft state", []string{"--data-dir", nonvoter}, 1, "no Raft state"},
		{"same node twice", []string{"--data-dir", nonvoter, "--data-dir", nonvoter + "/"}, 1, "both node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(t, append([]string{"recover"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q (stdout %q)", code, errOut, tc.code, tc.want, out)
			}
			if _, err := os.Stat(filepath.Join(nonvoter, "raft")); err == nil {
				t.Fatal("recover created Raft state in a data dir that had none")
			}
		})
	}
}

// recover refuses a running node's data dir, and rewrites a stopped one,
// saying what it did.
func TestRecoverCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	c := testcluster.Start(t, 1)
	dir := c.DataDir(0)
	_, errOut, code := runCmd(t, "recover", "--data-dir", dir)
	if code != 1 || !strings.Contains(errOut, "in use by a running node") || !strings.Contains(errOut, "stop that node first") {
		t.Fatalf("running node: exit %d, stderr %q", code, errOut)
	}
	c.Kill(0)
	_, errOut, code = runCmd(t, "recover", "--data-dir", dir, "--voters", "node-00,ghost")
	if code != 1 || !strings.Contains(errOut, "ghost is not in its Raft configuration") {
		t.Fatalf("unknown voter: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runCmd(t, "recover", "--data-dir", dir, "--voters", "other")
	if code != 1 || !strings.Contains(errOut, "node node-00 is not among the voters") {
		t.Fatalf("survivor not among the voters: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := runCmd(t, "recover", "--data-dir", dir)
	if code != 0 {
		t.Fatalf("recover exited %d: %s", code, errOut)
	}
	for _, want := range []string{"node node-00 (", "now the voters are [node-00 voter at 127.0.0.1:", "counts as committed", "Start these nodes again"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("recover said:\n%s", out)
}
