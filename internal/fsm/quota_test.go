package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// TestQuotaInTheApply: a tenant's command wrapped in its limits (Quota)
// is refused by the apply itself, changing nothing, once the tenant is
// at a limit, whatever a leader checked before proposing it: two leaders
// (or two requests racing one leader's check) each proposing a job for a
// tenant with room for one get one job between them. What adds nothing
// (a job that exists, a consumer renewing its lease) passes at the
// limit; the administrators' reserve holds; and a state restored from a
// snapshot refuses alike (usage is computed from the state).
func TestQuotaInTheApply(t *testing.T) {
	alice := Owner{Principal: "spiffe://prod/client/alice", Tenant: "vision"}
	bob := Owner{Principal: "spiffe://prod/client/bob", Tenant: "nlp"}
	l := Limits{MaxJobs: 1, MaxDatasets: 1, MaxConsumers: 1, MaxSpecBytes: 64, AdminReserve: 0}
	s := NewState()
	index := uint64(0)
	apply := func(c Command) error {
		index++
		_, err := s.ApplyIndex(index, at(c, 100))
		return err
	}
	create := func(name string, o Owner) Command {
		c := compatRequest(name, "fp", jobspec.Options{Sharding: jobspec.Dynamic})
		c.Owner = &o
		return NewCreateJob(c)
	}
	d := Dataset{Fingerprint: "fp", Spec: []byte("spec"), NumSplits: 4}
	steps := []struct {
		what  string
		c     Command
		quota bool // refused with ErrQuota
	}{
		{"alice's first dataset", NewQuota(l, NewRegisterOwnedDataset(d, alice)), false},
		{"alice's second dataset, past MaxDatasets", NewQuota(l, NewRegisterOwnedDataset(Dataset{Fingerprint: "fp2", Spec: []byte("s"), NumSplits: 1}, alice)), true},
		{"bob's dataset, past MaxSpecBytes", NewQuota(l, NewRegisterOwnedDataset(Dataset{Fingerprint: "fp3", Spec: make([]byte, 65), NumSplits: 1}, bob)), true},
		{"the first leader's job a-1", NewQuota(l, create("a-1", alice)), false},
		{"the second leader's job a-2, racing it", NewQuota(l, create("a-2", alice)), true},
		{"a-1 again (exists: adds nothing)", NewQuota(l, create("a-1", alice)), false},
		{"bob's job (another tenant: its own count)", NewQuota(l, create("b-1", bob)), false},
		{"a consumer of a-1", NewQuota(l, NewAttachConsumer("a-1", "c0")), false},
		{"c0 renewing its lease at the limit", NewQuota(l, NewAttachConsumer("a-1", "c0")), false},
		{"a second consumer of alice's jobs", NewQuota(l, NewAttachConsumer("a-1", "c1")), true},
		{"an administrator's job (not wrapped)", create("ops-1", Owner{Principal: "spiffe://prod/client/ops"}), false},
	}
	for _, st := range steps {
		err := apply(st.c)
		if got := errors.Is(err, ErrQuota); got != st.quota {
			t.Fatalf("%s: %v; want quota refusal %v", st.what, err, st.quota)
		}
		if !st.quota && err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if st.quota && !strings.Contains(err.Error(), "--tenant-max-") {
			t.Errorf("%s: %q names no limit", st.what, err)
		}
	}
	if _, ok := s.Jobs["a-2"]; ok || len(s.Datasets) != 1 || len(s.Jobs["a-1"].Consumers) != 1 {
		t.Fatalf("refused commands changed the state: jobs %d, datasets %d", len(s.Jobs), len(s.Datasets))
	}
	if u := s.TenantUsage("vision"); u.Jobs != 1 || u.Datasets != 1 || u.Consumers != 1 {
		t.Fatalf("alice's usage %+v", u)
	}

	snap, err := s.MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := UnmarshalSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restored.ApplyIndex(index+1, at(NewQuota(l, create("a-3", alice)), 100)); !errors.Is(err, ErrQuota) {
		t.Fatalf("after a restore, a job past the limit: %v", err)
	}

	// The administrators' reserve: with the state's job slots all but
	// the reserve taken, a tenant's job is refused; the same job with
	// room below the reserve passes.
	wide := Limits{MaxJobs: MaxJobs, MaxDatasets: MaxDatasets, MaxConsumers: 10, MaxSpecBytes: 1 << 20, AdminReserve: MaxJobs - len(s.Jobs)}
	if _, err := s.ApplyIndex(index+1, at(NewQuota(wide, create("b-2", bob)), 100)); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "--admin-reserve") {
		t.Fatalf("a job into the administrators' reserve: %v", err)
	}
	wide.AdminReserve--
	if _, err := s.ApplyIndex(index+1, at(NewQuota(wide, create("b-2", bob)), 100)); err != nil {
		t.Fatalf("a job below the reserve: %v", err)
	}
}

// TestQuotaRefusesWhatItDoesNotGuard: a Quota wraps only the commands
// that add to a tenant's share, and only their owned versions.
func TestQuotaRefusesWhatItDoesNotGuard(t *testing.T) {
	l := Limits{MaxJobs: 9, MaxDatasets: 9, MaxConsumers: 9, MaxSpecBytes: 1 << 20}
	for i, c := range []Command{
		NewQuota(l, NewPutKV("k", []byte("v"))),
		NewQuota(l, NewRegisterDataset(Dataset{Fingerprint: "fp", Spec: []byte("s"), NumSplits: 1})), // no owner
		NewQuota(l, NewQuota(l, NewAttachConsumer("j", "c"))),
		NewQuota(l, Command{Type: TypeCreateJob, Version: 99, Body: []byte{0xa0}}),
		{Type: TypeQuota, Version: 1, Body: []byte{0xa1, 0x01, 0x02}}, // limits not a map
	} {
		s := NewState()
		if _, err := s.ApplyIndex(1, at(c, 100)); err == nil || errors.Is(err, ErrQuota) {
			t.Errorf("command %d: %v; want it refused as invalid", i, err)
		}
		if s.Index != 0 {
			t.Errorf("command %d changed the state", i)
		}
	}
	inner := at(NewAttachConsumer("j", "c"), 5)
	c := Command{Type: TypeQuota, Version: 1}
	c.Body, _ = encMode.Marshal(quotaBody{Limits: l, Command: inner})
	if _, err := NewState().ApplyIndex(1, at(c, 100)); err == nil || !strings.Contains(fmt.Sprint(err), "time") {
		t.Errorf("an inner command with its own time: %v", err)
	}
}

// BenchmarkQuotaApply: what a Quota costs every replica in a state of
// 2,000 jobs of 4 tenants over 2,000 datasets: a consumer attaching
// (its tenant's usage counted), a heartbeat renewing (nothing counted),
// each beside the same command unwrapped (a node's or an
// administrator's).
func BenchmarkQuotaApply(b *testing.B) {
	s := NewState()
	index := uint64(0)
	apply := func(c Command) {
		index++
		if _, err := s.ApplyIndex(index, at(c, 100)); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 2000 {
		o := Owner{Principal: "p", Tenant: fmt.Sprint("t", i%4)}
		fp := fmt.Sprint("fp", i)
		apply(NewRegisterOwnedDataset(Dataset{Fingerprint: fp, Spec: []byte("spec"), NumSplits: 4}, o))
		c := compatRequest(fmt.Sprint("j", i), fp, jobspec.Options{Sharding: jobspec.Dynamic})
		c.Owner = &o
		apply(NewCreateJob(c))
		apply(NewAttachConsumer(fmt.Sprint("j", i), "c0"))
	}
	l := Limits{MaxJobs: 4096, MaxDatasets: 4096, MaxConsumers: 1 << 30, MaxSpecBytes: 1 << 40}
	seq := 0
	for _, c := range []struct {
		name string
		cmd  func(i int) Command
	}{
		{"attach/plain", func(i int) Command { return NewAttachConsumer(fmt.Sprint("j", i%2000), fmt.Sprint("n", i)) }},
		{"attach/quota", func(i int) Command {
			return NewQuota(l, NewAttachConsumer(fmt.Sprint("j", i%2000), fmt.Sprint("q", i)))
		}},
		{"renew/plain", func(int) Command { return NewAttachConsumer("j7", "c0") }},
		{"renew/quota", func(int) Command { return NewQuota(l, NewAttachConsumer("j7", "c0")) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				seq++ // a new consumer each time, across runs too
				cmd := c.cmd(seq)
				if _, err := s.ApplyIndex(index+1, at(cmd, 100)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
