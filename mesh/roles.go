package mesh

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// Roles and grants (docs/operating/security.md, "Roles and grants"): an
// operator's policy file (--policy) narrows what each tenant's (or
// principal's) requests may name, as etcd's roles grant key prefixes and
// Consul's ACL policies grant resources: job names by prefix, and the
// node's data roots, named stores and URL hosts. Without a policy,
// nothing is narrowed (tenants are kept apart as before). With one, a
// tenant's principal may do only what the roles bound to it grant
// (default deny); administrators and nodes are not bound by it, and the
// default tenant's data access (the administrators' own jobs are of the
// default tenant) is narrowed only by a binding that names it
// (default_tenant: true).

// maxPolicyBytes bounds a policy file; maxPolicyEntries the roles,
// bindings and each list.
const (
	maxPolicyBytes   = 1 << 20
	maxPolicyEntries = 4096
)

// Policy is a parsed policy file.
type Policy struct {
	Roles    map[string]Role `yaml:"roles" json:"roles"`
	Bindings []Binding       `yaml:"bindings" json:"bindings"`
}

// Role grants job names and data.
type Role struct {
	// Jobs are job-name patterns: a name, a prefix ending in '*'
	// ("a-*"), or "*" (any name).
	Jobs []string `yaml:"jobs" json:"jobs"`
	// DataRoots, Stores and Hosts name the node's data roots
	// (--data-root NAME=DIR, else the directory's base name), its named
	// stores (--object-store NAME=…) and host names ("h", "*.domain",
	// "*"; the node's --allow-host must allow them too). "*" in
	// DataRoots or Stores grants all.
	DataRoots []string `yaml:"data_roots" json:"data_roots"`
	Stores    []string `yaml:"stores" json:"stores"`
	Hosts     []string `yaml:"hosts" json:"hosts"`
}

// Binding gives roles to a tenant, a principal or the default tenant.
type Binding struct {
	Tenant        string   `yaml:"tenant" json:"tenant"`
	Principal     string   `yaml:"principal" json:"principal"`
	DefaultTenant bool     `yaml:"default_tenant" json:"default_tenant"`
	Roles         []string `yaml:"roles" json:"roles"`
}

// ParsePolicy parses a policy file (YAML, or JSON, which is YAML), with
// clear errors: unknown keys, a binding of no one or of several, a role
// no binding can name, a bad pattern.
func ParsePolicy(data []byte) (*Policy, error) {
	if len(data) > maxPolicyBytes {
		return nil, fmt.Errorf("policy: %d bytes, limit %d", len(data), maxPolicyBytes)
	}
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy: %v", err)
	}
	if len(p.Roles) > maxPolicyEntries || len(p.Bindings) > maxPolicyEntries {
		return nil, fmt.Errorf("policy: %d roles and %d bindings, limit %d each", len(p.Roles), len(p.Bindings), maxPolicyEntries)
	}
	for name, r := range p.Roles {
		if name == "" {
			return nil, fmt.Errorf("policy: a role with no name")
		}
		for what, l := range map[string][]string{"jobs": r.Jobs, "data_roots": r.DataRoots, "stores": r.Stores, "hosts": r.Hosts} {
			if len(l) > maxPolicyEntries {
				return nil, fmt.Errorf("policy: role %q: %d %s, limit %d", name, len(l), what, maxPolicyEntries)
			}
			for _, e := range l {
				if e == "" || strings.ContainsAny(e, " \t\n") {
					return nil, fmt.Errorf("policy: role %q: %s entry %q: want a name (no spaces)", name, what, e)
				}
				if what == "jobs" && strings.Contains(strings.TrimSuffix(e, "*"), "*") {
					return nil, fmt.Errorf("policy: role %q: job pattern %q: '*' only at the end (a prefix) or alone", name, e)
				}
			}
		}
	}
	for i, b := range p.Bindings {
		n := 0
		for _, set := range []bool{b.Tenant != "", b.Principal != "", b.DefaultTenant} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("policy: binding %d: name exactly one of tenant, principal or default_tenant: true", i+1)
		}
		for _, r := range b.Roles {
			if _, ok := p.Roles[r]; !ok {
				return nil, fmt.Errorf("policy: binding %d: no role named %q", i+1, r)
			}
		}
	}
	return &p, nil
}

// Grants are what a policy grants one principal: the union of its roles'.
type Grants struct {
	jobs []string
	data objstore.Grant
	// dataAll: the data is not narrowed (the privileged, no policy, an
	// unbound default tenant).
	dataAll bool
}

// GrantsOf are p's grants under pol (nil: no policy, all granted).
func (pol *Policy) GrantsOf(p api.Principal) Grants {
	if pol == nil || p.Privileged() {
		return Grants{jobs: []string{"*"}, dataAll: true}
	}
	var g Grants
	g.data = objstore.Grant{Roots: []string{}, Stores: []string{}, Hosts: []string{}}
	defaultBound := false
	for _, b := range pol.Bindings {
		switch {
		case b.Principal != "" && b.Principal == p.Name,
			b.Tenant != "" && b.Tenant == p.Tenant:
		case b.DefaultTenant && p.Tenant == "":
			defaultBound = true
		default:
			continue
		}
		for _, name := range b.Roles {
			r := pol.Roles[name]
			g.jobs = append(g.jobs, r.Jobs...)
			if b.Principal != "" {
				continue // a principal's binding grants job names; data is the tenant's
			}
			g.data.Roots = append(g.data.Roots, r.DataRoots...)
			g.data.Stores = append(g.data.Stores, r.Stores...)
			g.data.Hosts = append(g.data.Hosts, r.Hosts...)
		}
	}
	g.dataAll = p.Tenant == "" && !defaultBound
	return g
}

// DataGrantOf is the data a job of tenant may read under pol, on every
// node alike (a worker knows a job's tenant, not whether its creator
// was an administrator): a tenant's roles', or, for the default tenant
// unless a binding names it, everything the node allows (ok false: no
// narrowing).
func (pol *Policy) DataGrantOf(tenant string) (objstore.Grant, bool) {
	g := pol.GrantsOf(api.Principal{Name: "(a job of tenant " + tenant + ")", Tenant: tenant})
	return g.Data()
}

// MayJob tells whether the grants allow the job name.
func (g Grants) MayJob(name string) bool {
	for _, pat := range g.jobs {
		switch {
		case pat == "*", pat == name:
			return true
		case strings.HasSuffix(pat, "*") && strings.HasPrefix(name, strings.TrimSuffix(pat, "*")):
			return true
		}
	}
	return false
}

// Data is the data grant, and whether it narrows anything. "*" among
// the roots or stores grants all of them.
func (g Grants) Data() (objstore.Grant, bool) {
	if g.dataAll {
		return objstore.Grant{}, false
	}
	d := g.data
	if slices.Contains(d.Roots, "*") {
		d.Roots = nil
	}
	if slices.Contains(d.Stores, "*") {
		d.Stores = nil
	}
	if slices.Contains(d.Hosts, "*") {
		d.Hosts = nil
	}
	return d, true
}

// JobPatterns are the job-name patterns granted, sorted, for messages.
func (g Grants) JobPatterns() string {
	if len(g.jobs) == 0 {
		return "none"
	}
	s := slices.Clone(g.jobs)
	sort.Strings(s)
	return strings.Join(slices.Compact(s), ", ")
}
