package mesh_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/transport"
)

// TestDataRootsHoldNoSecrets (issue 36 item 6, issue 37 item 1): a node
// refuses to start with a data root that holds or lies inside its data
// dir, TLS files, gossip key file or an object store's credentials file,
// or /proc, saying which; and with a bad allowed host or store.
func TestDataRootsHoldNoSecrets(t *testing.T) {
	p := newTestPKI(t)
	crt, key := p.issue(t, transport.RoleNode, "n1")
	gossipKey := filepath.Join(t.TempDir(), "gossip.key")
	os.WriteFile(gossipKey, []byte("x"), 0o600)
	creds := filepath.Join(t.TempDir(), "s3.credentials")
	os.WriteFile(creds, []byte("[default]\n"), 0o600)
	data := t.TempDir()
	for _, c := range []struct {
		what string
		edit func(cfg *mesh.Config)
		want string
	}{
		{"a root holding the data dir", func(cfg *mesh.Config) { cfg.DataRoots = []string{filepath.Dir(cfg.DataDir)} }, "holds the node's data dir"},
		{"a root inside the data dir", func(cfg *mesh.Config) { cfg.DataRoots = []string{cfg.DataDir} }, "lies inside the node's data dir"},
		{"a root holding the TLS key", func(cfg *mesh.Config) { cfg.DataRoots = []string{p.dir} }, "holds the node's TLS"},
		{"a root holding the gossip key", func(cfg *mesh.Config) { cfg.DataRoots = []string{filepath.Dir(gossipKey)} }, "holds the gossip key"},
		{"a root holding a store's credentials", func(cfg *mesh.Config) {
			cfg.DataRoots = []string{filepath.Dir(creds)}
			cfg.ObjectStores = []objstore.NamedStore{{Name: "lake", Credentials: objstore.Credentials{File: creds}}}
		}, "holds object store lake's credentials"},
		{"/proc", func(cfg *mesh.Config) { cfg.DataRoots = []string{"/proc"} }, "/proc"},
		{"/", func(cfg *mesh.Config) { cfg.DataRoots = []string{"/"} }, "/proc"},
		{"a root that does not exist", func(cfg *mesh.Config) { cfg.DataRoots = []string{filepath.Join(data, "nothing")} }, "no such file"},
		{"a bad allowed host", func(cfg *mesh.Config) { cfg.AllowHosts = []string{"http://data.example.com/"} }, "allowed host"},
		{"a bad store", func(cfg *mesh.Config) { cfg.ObjectStores = []objstore.NamedStore{{Name: "Bad Name"}} }, "object store"},
	} {
		cfg := singleNode(t)
		cfg.TLSCA, cfg.TLSCert, cfg.TLSKey, cfg.GossipKeyFile = p.caFile, crt, key, gossipKey
		cfg.DataDir = filepath.Join(t.TempDir(), "node")
		c.edit(&cfg)
		_, err := startOrErr(t, cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal saying %q", c.what, err, c.want)
		}
	}
	cfg := singleNode(t)
	cfg.TLSCA, cfg.TLSCert, cfg.TLSKey, cfg.GossipKeyFile = p.caFile, crt, key, gossipKey
	cfg.DataRoots = []string{data}
	if _, err := startOrErr(t, cfg); err != nil {
		t.Fatalf("a root that holds only data: %v", err)
	}
}
