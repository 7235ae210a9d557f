package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
)

// TestOwnersBelowTheirLevel: a cluster below ProtocolOwners gets the
// owner-less forms: DropOwner makes a CreateJob v7 the v6 that creates
// the same job without an owner, and a snapshot at ProtocolJobspec (or
// ProtocolLegacy) holds no owner nor registration time, so it encodes
// as the state of the same commands without owners does (a node of the
// older release decodes it strictly, and would refuse the keys).
func TestOwnersBelowTheirLevel(t *testing.T) {
	alice := Owner{Principal: "spiffe://prod/client/alice", Tenant: "vision"}
	owned, plain := NewState(), NewState()
	d := Dataset{Fingerprint: "fp", Spec: []byte("spec"), NumSplits: 4}
	c := compatRequest("j", "fp", jobspec.Options{Sharding: jobspec.Dynamic})
	plainCreate := NewCreateJob(c)
	c.Owner = &alice
	ownedCreate := NewCreateJob(c)
	if ownedCreate.Version != 7 || plainCreate.Version != 6 {
		t.Fatalf("CreateJob versions: owned v%d, plain v%d; want 7 and 6", ownedCreate.Version, plainCreate.Version)
	}
	dropped, ok := DropOwner(at(ownedCreate, 10))
	if !ok || dropped.Version != 6 || !bytes.Equal(dropped.Body, plainCreate.Body) || dropped.At != 10 {
		t.Fatalf("DropOwner: v%d %v, at %d; want the plain v6 body at 10", dropped.Version, ok, dropped.At)
	}
	for i, cs := range [][2]Command{
		{NewRegisterOwnedDataset(d, alice), NewRegisterDataset(d)},
		{ownedCreate, plainCreate},
	} {
		if _, err := owned.ApplyIndex(uint64(i+1), at(cs[0], 100)); err != nil {
			t.Fatal(err)
		}
		if _, err := plain.ApplyIndex(uint64(i+1), at(cs[1], 100)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := owned.ApplyIndex(3, at(NewPutToken("t", Token{Hash: make([]byte, 32), Tenant: "vision", CreatedBy: "ops"}), 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.ApplyIndex(3, at(NewPutKV("k", nil), 100)); err != nil { // the same index
		t.Fatal(err)
	}
	if _, err := plain.ApplyIndex(3, at(NewDeleteKV("k"), 100)); err != nil {
		t.Fatal(err)
	}
	if j := owned.Jobs["j"]; j.Owner == nil || *j.Owner != alice || owned.Datasets["fp"].Owner == nil || owned.Datasets["fp"].RegisteredAt != 100 {
		t.Fatalf("owned state: job owner %v, dataset %+v", j.Owner, owned.Datasets["fp"])
	}
	for _, level := range []int{ProtocolLegacy, ProtocolJobspec} {
		got, err := owned.MarshalSnapshotAt(level)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.MarshalSnapshotAt(level)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("level %d: the owned state's snapshot differs from the plain one's", level)
		}
	}
	if owned.Jobs["j"].Owner == nil || len(owned.Tokens) != 1 {
		t.Error("a snapshot at a lower level took the owner or the token off the live state")
	}
	// Another tenant's CreateJob for the job is refused; the default
	// tenant's too; the job's own tenant's joins it.
	bob := c
	bob.Owner = &Owner{Principal: "spiffe://prod/client/bob", Tenant: "nlp"}
	if _, err := owned.ApplyIndex(4, at(NewCreateJob(bob), 200)); !errors.Is(err, ErrPermission) {
		t.Errorf("bob's CreateJob of alice's job: %v, want ErrPermission", err)
	}
	carol := c
	carol.Owner = &Owner{Principal: "spiffe://prod/client/carol"}
	if _, err := owned.ApplyIndex(5, at(NewCreateJob(carol), 200)); !errors.Is(err, ErrPermission) {
		t.Errorf("the default tenant's CreateJob of alice's job: %v, want ErrPermission", err)
	}
	alice2 := c
	alice2.Owner = &Owner{Principal: "spiffe://prod/client/alice2", Tenant: "vision"}
	if _, err := owned.ApplyIndex(6, at(NewCreateJob(alice2), 200)); err != nil {
		t.Errorf("a CreateJob of the job's tenant: %v", err)
	}
	// An owner in a version that cannot carry one is refused.
	v6 := ownedCreate
	v6.Version = 6
	if _, err := NewState().ApplyIndex(1, at(v6, 1)); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("CreateJob v6 with an owner: %v, want ErrInvalidCommand", err)
	}
}

// TestDatasetGCFreesSlots: at the state machine's bound of datasets every
// registration is refused (ErrLimit), for good while nothing is freed;
// collecting an unread dataset frees its slot. A dataset a job reads is
// kept, and one within its grace.
func TestDatasetGCFreesSlots(t *testing.T) {
	s := NewState()
	owner := Owner{Principal: "spiffe://prod/client/bob", Tenant: "nlp"}
	idx := uint64(0)
	apply := func(c Command, at0 int64) (any, error) {
		idx++
		return s.ApplyIndex(idx, at(c, at0))
	}
	for i := range MaxDatasets {
		if _, err := apply(NewRegisterOwnedDataset(Dataset{Fingerprint: fmt.Sprintf("fp%d", i), Spec: []byte("s"), NumSplits: 1}, owner), 100); err != nil {
			t.Fatal(err)
		}
	}
	more := Dataset{Fingerprint: "more", Spec: []byte("s"), NumSplits: 1}
	if _, err := apply(NewRegisterOwnedDataset(more, owner), 100); !errors.Is(err, ErrLimit) {
		t.Fatalf("a registration past %d datasets: %v, want ErrLimit", MaxDatasets, err)
	}
	c := compatRequest("j", "fp0", jobspec.Options{Sharding: jobspec.Dynamic})
	c.Owner = &owner
	if _, err := apply(NewCreateJob(c), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(NewGarbageCollectDataset("fp0", time.Second), 100+int64(time.Hour)); !errors.Is(err, ErrJobInUse) {
		t.Errorf("collecting a dataset a job reads: %v, want ErrJobInUse", err)
	}
	if _, err := apply(NewGarbageCollectDataset("fp1", time.Hour), 100+int64(time.Minute)); !errors.Is(err, ErrJobInUse) {
		t.Errorf("collecting a dataset within its grace: %v, want ErrJobInUse", err)
	}
	if u := s.UnreadDatasets(); len(u) != MaxDatasets-1 {
		t.Errorf("%d unread datasets, want %d", len(u), MaxDatasets-1)
	}
	if v, err := apply(NewGarbageCollectDataset("fp1", time.Hour), 100+int64(2*time.Hour)); err != nil || v != true {
		t.Fatalf("collecting an unread dataset past its grace: %v %v", v, err)
	}
	if _, err := apply(NewRegisterOwnedDataset(more, owner), 100); err != nil {
		t.Errorf("a registration after a slot was freed: %v", err)
	}
	if u := s.TenantUsage("nlp"); u.Datasets != MaxDatasets || u.Jobs != 1 || u.SpecBytes != MaxDatasets {
		t.Errorf("usage %+v", u)
	}
}
