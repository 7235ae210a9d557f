package mesh

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// dataAccess is the node's data-access policy (docs/operating/security.md,
// "Data access"): its data roots, allowed hosts and named stores, with its
// own secrets out of every root. The data dir must exist.
func (c *Config) dataAccess(log *slog.Logger) (*objstore.Access, error) {
	ac := objstore.AccessConfig{Roots: c.DataRoots, AllowHosts: c.AllowHosts, Stores: c.ObjectStores, Log: log}
	for _, p := range []objstore.Protected{
		{Path: c.DataDir, What: "the node's data dir"},
		{Path: c.TLSKey, What: "the node's TLS key"},
		{Path: c.TLSCert, What: "the node's TLS certificate"},
		{Path: c.TLSCA, What: "the cluster's CA certificate"},
		{Path: c.GossipKeyFile, What: "the gossip key"},
	} {
		if p.Path != "" {
			ac.Protected = append(ac.Protected, p)
		}
	}
	for _, s := range c.ObjectStores {
		for _, f := range s.CredentialsFiles() {
			ac.Protected = append(ac.Protected, objstore.Protected{Path: f, What: "object store " + s.Name + "'s credentials"})
		}
	}
	if _, exposed := c.exposed(); len(c.DataRoots) == 0 && !exposed && c.TLSCA == "" {
		// Loopback dev mode: what the developer runs the node beside. A
		// node given mutual TLS is not in dev mode, on loopback too: its
		// operator says what it reads.
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("default data root (the current directory): %w", err)
		}
		ac.ImplicitRoot = wd
		warnHomeRoot(log, wd, &homeWarning)
	}
	a, err := objstore.NewAccess(ac)
	if err != nil {
		return nil, fmt.Errorf("data access (--data-root, --allow-host, --object-store): %w", err)
	}
	return a, nil
}

// homeWarning is said once a process: several nodes of one process
// (testcluster, a demo) share its current directory.
var homeWarning sync.Once

// warnHomeRoot warns, once, that the default data root wd is the
// user's home directory.
func warnHomeRoot(log *slog.Logger, wd string, once *sync.Once) {
	if !isHomeDir(wd) {
		return
	}
	once.Do(func() {
		log.Warn("the default data root (the current directory) is a home directory: specs may read every file in it but hidden ones (.ssh, .aws, .git and other names starting with '.'); run the node from a directory of data, or give --data-root", "dir", wd)
	})
}

// isHomeDir tells whether dir is the user's home directory ($HOME), by
// its real path.
func isHomeDir(dir string) bool {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return false
	}
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	return real(home) == real(dir)
}
