package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// TestKeysStayInTheNode (issue 36 item 6, issue 37 item 1): a node
// process in loopback dev mode, started as a developer would in a
// directory that holds its data dir and its gossip key, reads specs'
// files under that directory (its default data root) but never its own
// secrets: the gossip key and the data dir's files (its stateless-reset
// key among them), named relative or absolute, through /proc/self/cwd, a
// symlink or a hard link in the directory, or a glob, are refused (a
// name: the generic permission_denied "not allowed"; a glob sees none of
// them). The same directory with its TLS files, under mutual TLS on
// loopback (not dev mode), is no data root: the node reads no local file
// until given --data-root (here data/, beside the TLS files), and then
// nothing outside it: not its TLS key, gossip key or data dir.
func TestKeysStayInTheNode(t *testing.T) {
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "tls")
	for _, d := range []string{tlsDir, filepath.Join(dir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := transport.NewCA("dev", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nodeCrt, nodeKey, err := ca.Issue(transport.Identity{Role: transport.RoleNode, Name: "p1"}, transport.CertOptions{ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cliCrt, cliKey, err := ca.Issue(transport.Identity{Role: transport.RoleClient, Name: "alice"}, transport.CertOptions{ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	gk := make([]byte, 32)
	rand.Read(gk)
	gossipKey := base64.StdEncoding.EncodeToString(gk)
	cliDir := t.TempDir() // the client's files are not the node's business
	write := func(files map[string][]byte) {
		t.Helper()
		for p, b := range files {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(map[string][]byte{
		filepath.Join(dir, "gossip.key"):         []byte(gossipKey + "\n"),
		filepath.Join(dir, "data", "corpus.txt"): []byte("public\ndata\n"),
		filepath.Join(cliDir, "alice.crt"):       cliCrt,
		filepath.Join(cliDir, "alice.key"):       cliKey,
	})
	// Links a hostile tenant would hope for (made by anyone with write
	// access to the directory).
	if err := os.Symlink(filepath.Join("d0", "stateless-reset.key"), filepath.Join(dir, "key-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "gossip.key"), filepath.Join(dir, "gossip-copy")); err != nil {
		t.Fatal(err)
	}

	// Dev mode: no TLS, the directory is the node's default data root.
	np := &nodeProcess{name: "p0", gossip: freePort(t), port: freePort(t), dir: dir}
	np.args = []string{"node", "--name", "p0", "--data-dir", "d0", "--bind", "127.0.0.1",
		"--gossip-port", strconv.Itoa(np.gossip), "--port", strconv.Itoa(np.port),
		"--gossip-key", "gossip.key", "--preset", "fast", "--log-level", logLevel()}
	np.start(t)
	t.Cleanup(np.kill)
	cl := dialNode(t, np.port, nil)
	resetKey, err := os.ReadFile(filepath.Join(dir, "d0", "stateless-reset.key"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := [][]byte{nodeKey, []byte(gossipKey), resetKey, []byte("PRIVATE KEY")}
	leaked := func(what string, got []byte, err error) bool {
		t.Helper()
		for _, s := range secrets {
			if bytes.Contains(got, s) || (err != nil && strings.Contains(err.Error(), string(s))) {
				t.Errorf("%s: a secret of the node arrived (err %v)", what, err)
				return true
			}
		}
		return false
	}
	refused := func(cl *client.Client, paths ...string) {
		t.Helper()
		for _, p := range paths {
			got, err := readWhole(t, cl, p)
			if leaked(p, got, err) {
				continue
			}
			if !errors.Is(err, transport.ErrPermissionDenied) || !strings.Contains(err.Error(), fmt.Sprintf("%q: not allowed", p)) {
				t.Errorf("%s: %v, want permission_denied %q: not allowed", p, err, p)
			}
		}
	}
	reads := func(cl *client.Client, paths ...string) {
		t.Helper()
		for _, p := range paths {
			if got, err := readWhole(t, cl, p); err != nil || !bytes.Contains(got, []byte("public")) {
				t.Errorf("%s: %q, %v, want the file", p, got, err)
			}
		}
	}

	reads(cl, "data/corpus.txt", filepath.Join(dir, "data", "corpus.txt"), "data/*.txt")
	refused(cl,
		"gossip.key", filepath.Join(dir, "gossip.key"), "/proc/self/cwd/gossip.key", "./gossip.key", "data/../gossip.key",
		"d0/stateless-reset.key", filepath.Join(dir, "d0", "stateless-reset.key"), "/proc/self/cwd/d0/stateless-reset.key",
		"d0/*", "d0/raft/*", "key-link", "gossip-copy", "/proc/self/environ", "/proc/self/cmdline")
	// Globs see none of the node's files: as if they were not there.
	for _, p := range []string{"*.key", "d*/*", "*/*", "*"} {
		got, err := readWhole(t, cl, p)
		if leaked(p, got, err) {
			continue
		}
		t.Logf("%s: %d bytes, %v", p, len(got), err)
	}
	cl.Close()
	np.kill()

	// Mutual TLS on loopback: not dev mode, no default data root. (The
	// TLS files come now: in dev mode the node has none, and files of
	// the directory that are not its own are data to it.)
	write(map[string][]byte{
		filepath.Join(tlsDir, "ca.crt"): ca.CertPEM(),
		filepath.Join(tlsDir, "p1.crt"): nodeCrt,
		filepath.Join(tlsDir, "p1.key"): nodeKey,
	})
	tlsNode := func(name string, extra ...string) *nodeProcess {
		np := &nodeProcess{name: name, gossip: freePort(t), port: freePort(t), dir: dir}
		np.args = append([]string{"node", "--name", name, "--data-dir", "d-" + name, "--bind", "127.0.0.1",
			"--gossip-port", strconv.Itoa(np.gossip), "--port", strconv.Itoa(np.port),
			"--gossip-key", "gossip.key", "--tls-ca", "tls/ca.crt", "--tls-cert", "tls/p1.crt", "--tls-key", "tls/p1.key",
			"--preset", "fast", "--log-level", logLevel()}, extra...)
		np.start(t)
		t.Cleanup(np.kill)
		return np
	}
	tlsConf, err := transport.ClientTLS(filepath.Join(tlsDir, "ca.crt"), filepath.Join(cliDir, "alice.crt"), filepath.Join(cliDir, "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	np = tlsNode("p1")
	cl = dialNode(t, np.port, tlsConf)
	refused(cl, "data/corpus.txt", filepath.Join(dir, "data", "corpus.txt"), "tls/p1.key", filepath.Join(tlsDir, "p1.key"))
	cl.Close()
	np.kill()

	np = tlsNode("p1", "--data-root", "data")
	cl = dialNode(t, np.port, tlsConf)
	reads(cl, "corpus.txt", filepath.Join(dir, "data", "corpus.txt"))
	refused(cl, filepath.Join(tlsDir, "p1.key"), "../tls/p1.key", "/proc/self/cwd/tls/p1.key", "../gossip.key", filepath.Join(dir, "d-p1", "stateless-reset.key"))
	cl.Close()
}

// dialNode dials a node process on loopback until it answers with a
// leader (60 s at most).
func dialNode(t *testing.T, port int, tlsConf *tls.Config) *client.Client {
	t.Helper()
	fast := transport.FastConfig()
	for deadline := time.Now().Add(60 * time.Second); ; {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cl, err := client.Dial(dctx, fmt.Sprintf("127.0.0.1:%d", port), client.Options{Transport: &fast, TLS: tlsConf, HeartbeatInterval: 100 * time.Millisecond})
		cancel()
		if err == nil {
			st, serr := cl.Status(context.Background())
			if serr == nil && st.Leader != "" {
				return cl
			}
			cl.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node on port %d did not come up: %v", port, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var keysJobs int

// readWhole distributes a whole_file spec of path under a new job name
// and reads it to its end within 30 s: the bytes delivered and the first
// error.
func readWhole(t *testing.T, cl *client.Client, path string) ([]byte, error) {
	t.Helper()
	keysJobs++
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it, err := cl.Distribute(ctx, pipeline.NewSpec(pipeline.FromFiles("whole_file", path)),
		client.JobOptions{Name: fmt.Sprintf("keys-%d", keysJobs), Sharding: client.Dynamic, Offload: client.OffloadRemote})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var got bytes.Buffer
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return got.Bytes(), nil
		}
		if err != nil {
			return got.Bytes(), err
		}
		for _, x := range b.Tensors {
			got.Write(x.Data)
		}
		b.Release()
	}
}
