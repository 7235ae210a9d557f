package objstore

import (
	"net/url"
	"slices"
	"strings"
)

// Grant narrows a policy to what one tenant's roles grant (a node's
// --policy: docs/operating/security.md, "Roles and grants"). A nil list
// narrows nothing; an empty one allows nothing of its kind.
type Grant struct {
	// Roots are names of the policy's data roots (--data-root NAME=DIR,
	// else the directory's base name). A spec's relative path is relative
	// to the first root granted.
	Roots []string
	// Stores are names of the policy's object stores.
	Stores []string
	// Hosts are host names ("data.example.com"), "*.example.com" or "*":
	// a URL, and every redirect hop, must name one of them, and the
	// policy's AllowHosts must allow it too.
	Hosts []string
}

// rootName splits a data root given as NAME=DIR; name is "" for a plain
// directory. A NAME is letters, digits, '-', '_' and '.', so a directory
// whose path holds '=' after a '/' is taken as a directory.
func rootName(given string) (name, dir string) {
	n, d, ok := strings.Cut(given, "=")
	if !ok || n == "" || d == "" {
		return "", given
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "", given
		}
	}
	return n, d
}

// RootNames are the names of the policy's data roots, in order.
func (a *Access) RootNames() []string {
	var out []string
	for _, r := range a.local.roots {
		out = append(out, r.name)
	}
	return out
}

// Narrow is a's policy cut to what g grants: its roots, stores and hosts
// among a's. The result shares a's roots and connections; closing it
// does nothing (a's Close does). A policy of all local files (a user's
// own process) is narrowed in its hosts and stores only.
func (a *Access) Narrow(g Grant) *Access {
	n := &Access{local: a.local, hosts: a.hosts, stores: a.stores, env: a.env, log: a.log, desc: a.desc, parent: a}
	if g.Roots != nil && !a.local.all {
		n.local.roots = nil
		for _, r := range a.local.roots {
			if slices.Contains(g.Roots, r.name) {
				n.local.roots = append(n.local.roots, r)
			}
		}
		n.local.view = true
	}
	if g.Stores != nil {
		n.stores = map[string]NamedStore{}
		for name, s := range a.stores {
			if slices.Contains(g.Stores, name) {
				n.stores[name] = s
			}
		}
		n.env = false
	}
	if g.Hosts != nil {
		base := a.hosts
		if base == nil {
			base, _ = newHostPolicy([]string{"*"}) // any host, as the grant narrows it
		}
		h := *base
		h.grant = hostGrant(g.Hosts)
		n.hosts = &h
	}
	if a.local.all {
		n.local.view = true
	}
	return n
}

// hostGrant is the host names a grant allows (Grant.Hosts).
type hostGrant []string

// allows tells whether host matches one of g's entries.
func (g hostGrant) allows(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, e := range g {
		e = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(e)), ".")
		switch {
		case e == "*", e == host:
			return true
		case strings.HasPrefix(e, "*.") && strings.HasSuffix(host, e[1:]):
			return true
		}
	}
	return false
}

// checkGrant refuses a URL whose host the grant does not name.
func (g hostGrant) check(u *url.URL) error {
	if g == nil || g.allows(u.Hostname()) {
		return nil
	}
	return &DeniedError{Name: u.String(), Reason: "host " + u.Hostname() + " is not among the hosts the tenant's roles grant (--policy)"}
}
