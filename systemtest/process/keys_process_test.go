package process

import (
	"bytes"
	"context"
	"crypto/rand"
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
// directory that holds its data dir, its TLS files and its gossip key,
// reads specs' files under that directory (its default data root) but
// never its own secrets: the TLS key, the gossip key and the data dir's
// files, named relative or absolute, through /proc/self/cwd, a symlink or
// a hard link in the directory, or a glob, are refused (a name: the
// generic permission_denied "not allowed"; a glob sees none of them).
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
	nodeCrt, nodeKey, err := ca.Issue(transport.Identity{Role: transport.RoleNode, Name: "p0"}, transport.CertOptions{ValidFor: time.Hour})
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
	files := map[string][]byte{
		filepath.Join(tlsDir, "ca.crt"):          ca.CertPEM(),
		filepath.Join(tlsDir, "p0.crt"):          nodeCrt,
		filepath.Join(tlsDir, "p0.key"):          nodeKey,
		filepath.Join(dir, "gossip.key"):         []byte(gossipKey + "\n"),
		filepath.Join(dir, "data", "corpus.txt"): []byte("public\ndata\n"),
		filepath.Join(cliDir, "alice.crt"):       cliCrt,
		filepath.Join(cliDir, "alice.key"):       cliKey,
	}
	for p, b := range files {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Links a hostile tenant would hope for (made by anyone with write
	// access to the directory).
	if err := os.Symlink(filepath.Join("tls", "p0.key"), filepath.Join(dir, "key-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "gossip.key"), filepath.Join(dir, "gossip-copy")); err != nil {
		t.Fatal(err)
	}

	np := &nodeProcess{name: "p0", gossip: freePort(t), port: freePort(t), dir: dir}
	np.args = []string{"node", "--name", "p0", "--data-dir", "d1", "--bind", "127.0.0.1",
		"--gossip-port", strconv.Itoa(np.gossip), "--port", strconv.Itoa(np.port),
		"--gossip-key", "gossip.key", "--tls-ca", "tls/ca.crt", "--tls-cert", "tls/p0.crt", "--tls-key", "tls/p0.key",
		"--preset", "fast", "--log-level", logLevel()}
	np.start(t)
	t.Cleanup(np.kill)

	tlsConf, err := transport.ClientTLS(filepath.Join(tlsDir, "ca.crt"), filepath.Join(cliDir, "alice.crt"), filepath.Join(cliDir, "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fast := transport.FastConfig()
	var cl *client.Client
	for deadline := time.Now().Add(60 * time.Second); ; {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		cl, err = client.Dial(dctx, fmt.Sprintf("127.0.0.1:%d", np.port), client.Options{Transport: &fast, TLS: tlsConf, HeartbeatInterval: 100 * time.Millisecond})
		cancel()
		if err == nil {
			st, serr := cl.Status(ctx)
			if serr == nil && st.Leader != "" {
				break
			}
			cl.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not come up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer cl.Close()
	resetKey, err := os.ReadFile(filepath.Join(dir, "d1", "stateless-reset.key"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := [][]byte{nodeKey, []byte(gossipKey), resetKey, []byte("PRIVATE KEY")}

	n := 0
	read := func(path string) ([]byte, error) {
		n++
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		it, err := cl.Distribute(rctx, pipeline.NewSpec(pipeline.FromFiles("whole_file", path)),
			client.JobOptions{Name: fmt.Sprintf("keys-%d", n), Sharding: client.Dynamic, Offload: client.OffloadRemote})
		if err != nil {
			return nil, err
		}
		defer it.Close()
		var got bytes.Buffer
		for {
			b, err := it.Next(rctx)
			if errors.Is(err, io.EOF) {
				return got.Bytes(), nil
			}
			if err != nil {
				return got.Bytes(), err
			}
			for _, x := range b.Tensors {
				got.Write(x.Data)
			}
		}
	}

	// The directory is the node's default data root: its data are read.
	for _, p := range []string{"data/corpus.txt", filepath.Join(dir, "data", "corpus.txt"), "data/*.txt"} {
		if got, err := read(p); err != nil || !bytes.Contains(got, []byte("public")) {
			t.Errorf("%s: %q, %v, want the file", p, got, err)
		}
	}
	leaked := func(what string, got []byte, err error) bool {
		for _, s := range secrets {
			if bytes.Contains(got, s) || (err != nil && strings.Contains(err.Error(), string(s))) {
				t.Errorf("%s: a secret of the node arrived (err %v)", what, err)
				return true
			}
		}
		return false
	}
	for _, p := range []string{
		"tls/p0.key", filepath.Join(tlsDir, "p0.key"), "/proc/self/cwd/tls/p0.key", "./tls/p0.key", "tls/../tls/p0.key",
		"gossip.key", filepath.Join(dir, "gossip.key"), "/proc/self/cwd/gossip.key",
		"d1/stateless-reset.key", filepath.Join(dir, "d1", "stateless-reset.key"), "d1/*", "d1/raft/*",
		"key-link", "gossip-copy", "/proc/self/environ",
	} {
		got, err := read(p)
		if leaked(p, got, err) {
			continue
		}
		if !errors.Is(err, transport.ErrPermissionDenied) || !strings.HasSuffix(err.Error(), fmt.Sprintf("%q: not allowed", p)) && !strings.Contains(err.Error(), fmt.Sprintf("%q: not allowed", p)) {
			t.Errorf("%s: %v, want permission_denied %q: not allowed", p, err, p)
		}
	}
	// Globs see none of the node's files: as if they were not there.
	for _, p := range []string{"tls/*", "*.key", "*/*.key", "*/*"} {
		got, err := read(p)
		if leaked(p, got, err) {
			continue
		}
		t.Logf("%s: %d bytes, %v", p, len(got), err)
	}
}
