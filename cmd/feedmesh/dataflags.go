package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// listFlag is a flag given once per value (--data-root A --data-root B);
// one value may also hold several, separated by sep (what its
// environment variable holds: FEEDMESH_DATA_ROOT=/data/a:/data/b).
type listFlag struct {
	vals []string
	sep  string
}

func (l *listFlag) String() string { return strings.Join(l.vals, l.sep) }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, l.sep) {
		if s = strings.TrimSpace(s); s != "" {
			l.vals = append(l.vals, s)
		}
	}
	return nil
}

// dataFlags are the data-access flags of `node` and `run-local`
// (docs/operating/security.md, "Data access").
type dataFlags struct {
	roots, hosts, stores listFlag
}

func addDataFlags(fs *flag.FlagSet, node bool) *dataFlags {
	d := &dataFlags{roots: listFlag{sep: ":"}, hosts: listFlag{sep: ","}, stores: listFlag{sep: ";"}}
	rootHelp := "a directory (`DIR`) whose files specs may read (repeat for several; ':'-separated in the variable): a spec's path is relative to the first or absolute under one; no '..', no link out of it; NAME=DIR names it for --policy (else its base name). Default: the current directory in loopback dev mode (no --tls-*), none off loopback or under mutual TLS"
	hostHelp := "a `HOST` http(s) sources and tokenizer URLs may reach (repeat, or comma-separated): a name (its public addresses), *.domain, *, an IP address or a CIDR network; loopback, link-local and private addresses only by address or network. Default: none"
	storeHelp := "a named object store specs read as s3://NAME/bucket/key (repeat; ';'-separated in the variable): `NAME=endpoint=URL,...` with region=R,path_style=true and where its credentials are (access_key_env=VAR,secret_key_env=VAR | credentials_file=PATH[,profile=P] | anonymous=true; default: the AWS environment)"
	if !node {
		rootHelp = "read local files only under this directory (`DIR`; repeat for several); default: every file you may read"
		hostHelp = "let http(s) sources reach only this `HOST` (repeat; as feedmesh node's --allow-host); default: any host"
		storeHelp = "a named object store specs read as s3://NAME/bucket/key (repeat): `NAME=endpoint=URL,...` as feedmesh node's --object-store"
	}
	fs.Var(&d.roots, "data-root", rootHelp)
	fs.Var(&d.hosts, "allow-host", hostHelp)
	fs.Var(&d.stores, "object-store", storeHelp)
	return d
}

// namedStores parses the --object-store values.
func (d *dataFlags) namedStores() ([]objstore.NamedStore, error) {
	var out []objstore.NamedStore
	for _, v := range d.stores.vals {
		s, err := objstore.ParseNamedStore(v)
		if err != nil {
			return nil, fmt.Errorf("--object-store: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

// localAccess is run-local's policy: the user's own process reads every
// file it may, any host and the environment's S3, unless the flags
// narrow it; named stores as given.
func (d *dataFlags) localAccess() (*objstore.Access, error) {
	stores, err := d.namedStores()
	if err != nil {
		return nil, err
	}
	return objstore.NewAccess(objstore.AccessConfig{
		AllLocalFiles: len(d.roots.vals) == 0, Roots: d.roots.vals,
		AllHosts: len(d.hosts.vals) == 0, AllowHosts: d.hosts.vals,
		Stores: stores, EnvStore: true,
	})
}

// loadPolicy reads and parses a --policy file.
func loadPolicy(path string) (*mesh.Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, fmt.Errorf("--policy %s: %w", path, err)
	}
	p, err := mesh.ParsePolicy(b)
	if err != nil {
		return nil, fmt.Errorf("--policy %s: %w", path, err)
	}
	return p, nil
}
