package fsm

import "fmt"

// Owner is who created a job or registered a dataset (docs/operating/
// security.md, "Tenants and permissions"): the principal, and its tenant
// ("" for the default tenant). CreateJob v7 and RegisterDataset v2 carry
// it; a job or dataset of an older entry has none (nil): it is the
// default tenant's, created by an anonymous or legacy principal.
type Owner struct {
	Principal string `cbor:"1,keyasint" json:"principal"`
	Tenant    string `cbor:"2,keyasint,omitempty" json:"tenant,omitempty"`
}

// TenantOf is the tenant of what o owns: "" (the default tenant) for an
// owner of an older entry (nil).
func TenantOf(o *Owner) string {
	if o == nil {
		return ""
	}
	return o.Tenant
}

// checkOwner checks an owner a command carries.
func checkOwner(o *Owner) error {
	if o == nil {
		return nil
	}
	if err := checkName("owner's principal", o.Principal); err != nil {
		return err
	}
	if len(o.Tenant) > maxNameBytes {
		return fmt.Errorf("%w: owner's tenant of %d bytes, limit %d", ErrInvalidCommand, len(o.Tenant), maxNameBytes)
	}
	return nil
}

// Bounds of the whole state, for the quotas a proposer applies below
// them (mesh: per tenant, with a share kept for administrators).
const (
	MaxDatasets = maxDatasets
	MaxJobs     = maxJobs
)

// Usage is what a tenant holds in the state: its jobs (share groups, the
// state machine's own, are nobody's), the datasets it registered first
// and the bytes of their specs; and the state's totals.
type Usage struct {
	Jobs, Datasets       int
	Consumers            int // attached to its jobs
	SpecBytes            int64
	AllJobs, AllDatasets int
}

// TenantUsage is tenant's Usage ("": the default tenant's, owner-less
// entries among them).
func (s *State) TenantUsage(tenant string) Usage {
	u := Usage{AllJobs: len(s.Jobs), AllDatasets: len(s.Datasets)}
	for _, j := range s.Jobs {
		if !j.Group && TenantOf(j.Owner) == tenant {
			u.Jobs++
			u.Consumers += len(j.Consumers)
		}
	}
	for _, d := range s.Datasets {
		if TenantOf(d.Owner) == tenant {
			u.Datasets++
			u.SpecBytes += int64(len(d.Spec))
		}
	}
	return u
}
