package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/testcluster"
)

// TestTLSCommandsMakeACluster (issue 36): the files `feedmesh tls ca
// create` and `tls cert create` write make a 5-node mutual-TLS cluster
// (with a gossip key) that forms, serves a client holding a client
// certificate (members, and a job read over the data streams), loses its
// leader to a kill and serves the client again. A client without a
// certificate is refused. The commands refuse to overwrite and write keys
// 0600.
func TestTLSCommandsMakeACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dir := t.TempDir()
	out, errOut, code := runCmd(t, "tls", "ca", "create", "--cluster", "prod", "--dir", dir, "--days", "30")
	if code != 0 {
		t.Fatalf("tls ca create exited %d: %s", code, errOut)
	}
	caFile := filepath.Join(dir, "prod-ca.crt")
	for _, want := range []string{caFile, filepath.Join(dir, "prod-ca.key"), "0600", "tls cert create --dir " + dir + " --node NAME", "--client NAME"} {
		if !strings.Contains(out, want) {
			t.Errorf("tls ca create output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("tls ca create:\n%s", out)
	caKey, _ := os.ReadFile(filepath.Join(dir, "prod-ca.key"))
	if _, errOut, code := runCmd(t, "tls", "ca", "create", "--cluster", "prod", "--dir", dir); code == 0 || !strings.Contains(errOut, "already exists") {
		t.Errorf("a second tls ca create: exit %d, %q; want a refusal to overwrite", code, errOut)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "prod-ca.key")); !bytes.Equal(again, caKey) {
		t.Error("the CA key was overwritten")
	}

	names := []string{"node-00", "node-01", "node-02", "node-03", "node-04"} // testcluster's
	for _, n := range names {
		out, errOut, code := runCmd(t, "tls", "cert", "create", "--dir", dir, "--node", n, "--days", "7")
		if code != 0 {
			t.Fatalf("tls cert create --node %s exited %d: %s", n, code, errOut)
		}
		if !strings.Contains(out, "spiffe://prod/node/"+n) || !strings.Contains(out, "node --name "+n+" --tls-ca prod-ca.crt --tls-cert prod-node-"+n+".crt") {
			t.Errorf("tls cert create --node %s output:\n%s", n, out)
		}
	}
	out, errOut, code = runCmd(t, "tls", "cert", "create", "--dir", dir, "--client", "alice", "--days", "7")
	if code != 0 {
		t.Fatalf("tls cert create --client exited %d: %s", code, errOut)
	}
	t.Logf("tls cert create --client:\n%s", out)
	if _, errOut, code := runCmd(t, "tls", "cert", "create", "--dir", dir, "--node", "node-00", "--days", "7"); code == 0 || !strings.Contains(errOut, "already exists") {
		t.Errorf("a second certificate for node-00: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCmd(t, "tls", "cert", "create", "--dir", dir, "--node", "n9", "--days", "31"); code != 2 || !strings.Contains(errOut, "outlive its CA") {
		t.Errorf("a certificate outliving the CA: exit %d, %q", code, errOut)
	}
	keys, _ := filepath.Glob(filepath.Join(dir, "*.key"))
	if len(keys) != 7 {
		t.Errorf("keys written: %v, want the CA's, 5 nodes' and alice's", keys)
	}
	for _, k := range keys {
		if st, err := os.Stat(k); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", k, st.Mode().Perm(), err)
		}
	}

	gossipKey := make([]byte, 32)
	rand.Read(gossipKey)
	c := testcluster.Start(t, 5, testcluster.WithConfig(func(_ int, cfg *mesh.Config) {
		cfg.TLSCA = caFile
		cfg.TLSCert = filepath.Join(dir, "prod-node-"+cfg.Name+".crt")
		cfg.TLSKey = filepath.Join(dir, "prod-node-"+cfg.Name+".key")
		cfg.GossipKey = gossipKey
	}))
	for i := range names {
		if id, ok := c.Node(i).Transport().LocalIdentity(); !ok || id.String() != "spiffe://prod/node/"+names[i] {
			t.Errorf("node %d runs as %v (%v)", i, id, ok)
		}
	}

	alice := []string{"--tls-ca", caFile, "--tls-cert", filepath.Join(dir, "prod-client-alice.crt"), "--tls-key", filepath.Join(dir, "prod-client-alice.key")}
	addr := c.Node(1).Addr()
	out, errOut, code = runCmd(t, append([]string{"members", "--addr", addr, "--json"}, alice...)...)
	if code != 0 {
		t.Fatalf("members with alice's certificate exited %d: %s", code, errOut)
	}
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != 5 {
		t.Errorf("members lists %d nodes:\n%s", n, out)
	}

	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("source:\n  range: {stop: 3000, split_size: 100}\nops:\n  - batch: {size: 50}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(job, addr string) {
		t.Helper()
		out, errOut, code := runCmd(t, append([]string{"read", "--addr", addr, "--spec", spec, "--job", job, "--json", "--progress=false", "--offload", "remote"}, alice...)...)
		if code != 0 {
			t.Fatalf("read of %s with alice's certificate exited %d: %s", job, code, errOut)
		}
		var s readSummary
		if err := json.Unmarshal([]byte(out), &s); err != nil || s.Elements != 3000 {
			t.Errorf("read of %s over mutual TLS: %d elements (%v), want 3000: %s", job, s.Elements, err, out)
		}
	}
	read("tls", addr)

	// The leader dies; the cluster elects another among the certified
	// nodes and serves alice again.
	li, _ := c.WaitLeader(t, 20*time.Second)
	c.Kill(li)
	c.WaitFor(t, 30*time.Second, "a new leader after the kill", func() bool {
		i, l := c.Leader()
		return l != nil && i != li
	})
	survivor := c.Node((li + 1) % 5).Addr()
	read("tls-after-kill", survivor)

	// No certificate, or dev mode: refused by the nodes.
	for _, args := range [][]string{{"--tls-ca", caFile}, nil} {
		_, errOut, code := runCmd(t, append([]string{"members", "--addr", addr, "--timeout", "3s"}, args...)...)
		if code == 0 {
			t.Errorf("members with %v was served", args)
		}
		t.Logf("members with %v: %s", args, strings.TrimSpace(errOut))
	}
}

// TestTLSCertCreateFindsTheCA: without --ca-cert, cert create takes the one
// CA in --dir, however the other certificates there are named, and says
// what to do when there is none, or several.
func TestTLSCertCreateFindsTheCA(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runCmd(t, "tls", "cert", "create", "--dir", dir, "--node", "n1"); code != 2 || !strings.Contains(errOut, "feedmesh tls ca create") {
		t.Errorf("no CA: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runCmd(t, "tls", "ca", "create", "--dir", dir, "--cluster", "prod"); code != 0 {
		t.Fatal(errOut)
	}
	for _, name := range []string{"ca", "n1"} { // prod-node-ca.crt ends like a CA's file
		if _, errOut, code := runCmd(t, "tls", "cert", "create", "--dir", dir, "--node", name); code != 0 {
			t.Fatalf("cert create --node %s: exit %d, %s", name, code, errOut)
		}
	}
	if _, errOut, code := runCmd(t, "tls", "ca", "create", "--dir", dir, "--cluster", "staging"); code != 0 {
		t.Fatal(errOut)
	}
	if _, errOut, code := runCmd(t, "tls", "cert", "create", "--dir", dir, "--node", "n2"); code != 2 || !strings.Contains(errOut, "several CAs") || !strings.Contains(errOut, "--ca-cert") {
		t.Errorf("two CAs: exit %d, %q", code, errOut)
	}
	out, errOut, code := runCmd(t, "tls", "cert", "create", "--dir", dir, "--node", "n2", "--ca-cert", filepath.Join(dir, "staging-ca.crt"))
	if code != 0 || !strings.Contains(out, "spiffe://staging/node/n2") {
		t.Errorf("--ca-cert staging: exit %d, %s%s", code, out, errOut)
	}
}

// TestNodeProcessRefusals runs the product binary: `feedmesh node` with a
// client certificate, or with another node's certificate, exits saying so;
// on a non-loopback address without mutual TLS and gossip key it exits
// saying what to do, and with --insecure it runs.
func TestNodeProcessRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the feedmesh binary")
	}
	bin := buildFeedmesh(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"tls", "ca", "create", "--cluster", "prod", "--dir", dir},
		{"tls", "cert", "create", "--dir", dir, "--node", "n1"},
		{"tls", "cert", "create", "--dir", dir, "--client", "alice"},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	tlsFlags := func(base string) []string {
		return []string{"--tls-ca", filepath.Join(dir, "prod-ca.crt"), "--tls-cert", filepath.Join(dir, base+".crt"), "--tls-key", filepath.Join(dir, base+".key")}
	}
	node := func(args ...string) []string {
		return append([]string{"node", "--data-dir", t.TempDir(), "--gossip-port", "0", "--port", "0", "--preset", "fast", "--log-level", "warn"}, args...)
	}
	refuses := func(what string, args []string, wants ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("%s: %v, want exit status 1; stderr:\n%s", what, err, stderr.String())
			return
		}
		for _, w := range wants {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr does not say %q:\n%s", what, w, stderr.String())
			}
		}
		t.Logf("%s: %s", what, strings.TrimSpace(stderr.String()))
	}
	refuses("a node with a client certificate", node(append([]string{"--name", "alice"}, tlsFlags("prod-client-alice")...)...),
		"is a client certificate", "feedmesh tls cert create --node NAME")
	refuses("node n2 with n1's certificate", node(append([]string{"--name", "n2"}, tlsFlags("prod-node-n1")...)...),
		`node name "n2"`, "spiffe://prod/node/n1", "feedmesh tls cert create --node n2")

	// Data access (issue 36 item 6): a data root holding the node's TLS
	// key, or a bad allowed host or object store, is refused at start.
	refuses("a data root holding the node's TLS key", node(append([]string{"--name", "n1", "--data-root", dir}, tlsFlags("prod-node-n1")...)...),
		"data root "+dir+" holds the node's TLS")
	refuses("a bad --allow-host", node("--name", "n1", "--allow-host", "http://data.example.com/"), "allowed host")
	refuses("a bad --object-store", node("--name", "n1", "--object-store", "Lake=endpoint=x"), "--object-store", `object store "Lake"`)

	ip, ok := nonLoopbackIP()
	if !ok {
		t.Skip("this machine has no IPv4 address besides loopback that a socket can bind: the non-loopback case cannot run here")
	}
	refuses("a node on "+ip+" without mutual TLS and gossip key", node("--name", "n1", "--bind", ip),
		ip+", which is not a loopback address", "feedmesh tls ca create", "--gossip-key", "--insecure")

	// --insecure: it starts (prints its address), and stops on SIGTERM.
	cmd := exec.Command(bin, node("--name", "n1", "--bind", ip, "--insecure", "--drain-timeout", "0")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		line := ""
		if sc.Scan() {
			line = sc.Text()
		}
		first <- line
		for sc.Scan() {
		}
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, "feedmesh node n1: QUIC "+ip+":") {
			t.Fatalf("--insecure node on %s printed %q; stderr:\n%s", ip, line, stderr.String())
		}
		t.Logf("--insecure: %s", line)
	case <-time.After(60 * time.Second):
		t.Fatalf("--insecure node did not start within 60s; stderr:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("--insecure node after SIGTERM: %v; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "insecure") {
		t.Errorf("--insecure node logged no warning:\n%s", stderr.String())
	}
}

// buildFeedmesh builds this command into the test's directory: the node
// processes are the product binary, started as a user starts it.
func buildFeedmesh(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "feedmesh")
	if out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return path
}

// nonLoopbackIP is an IPv4 address of this machine, not loopback, that a
// socket can bind.
func nonLoopbackIP() (string, bool) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", false
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		if pc, err := net.ListenPacket("udp", net.JoinHostPort(ipn.IP.String(), "0")); err == nil {
			pc.Close()
			return ipn.IP.String(), true
		}
	}
	return "", false
}
