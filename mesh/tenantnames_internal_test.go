package mesh

import (
	"errors"
	"fmt"
	"testing"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/transport"
)

// TestJobNamesPerTenant is the translation of job names at the entry
// (tenantnames.go), pure: which names a principal's short name becomes,
// how an internal name is shown back, and that every request naming a
// job is qualified.
func TestJobNamesPerTenant(t *testing.T) {
	alice := api.Principal{Name: "alice", Tenant: "vision"}
	carol := api.Principal{Name: "carol"}
	ops := api.Principal{Name: "ops", Admin: true}
	visionOps := api.Principal{Name: "vops", Tenant: "vision", Admin: true}
	node := api.Principal{Name: "n1", Node: true}
	for _, c := range []struct {
		p             api.Principal
		given, intern string
	}{
		{alice, "train", "@vision/train"},
		{alice, "@nlp/train", "@vision/@nlp/train"}, // refused on the leader (reservedJobName)
		{alice, "", ""},
		{carol, "train", "train"},
		{ops, "train", "train"},
		{ops, "@nlp/train", "@nlp/train"},
		{visionOps, "train", "@vision/train"},
		{visionOps, "@nlp/train", "@nlp/train"},
		{node, "@nlp/train", "@nlp/train"},
		{anonymous, "train", "train"},
	} {
		if got := qualifyJobName(c.p, c.given); got != c.intern {
			t.Errorf("%s names %q: internal %q, want %q", c.p.Name, c.given, got, c.intern)
		}
	}
	for _, c := range []struct {
		p             api.Principal
		intern, shown string
	}{
		{alice, "@vision/train", "train"},
		{alice, "@vision/@nlp/train", "@nlp/train"},
		{carol, "train", "train"},
		{ops, "@nlp/train", "@nlp/train"},
		{visionOps, "@vision/train", "train"},
		{visionOps, "@nlp/train", "@nlp/train"},
		{node, "@vision/train", "@vision/train"},
	} {
		if got := displayJobName(c.p, c.intern); got != c.shown {
			t.Errorf("%s is shown %q as %q, want %q", c.p.Name, c.intern, got, c.shown)
		}
	}
	for _, c := range []struct {
		name   string
		tenant string
		ok     bool
	}{{"@vision/train", "vision", true}, {"train", "", false}, {"@vision", "", false}, {"@/train", "", false}, {"@vision/", "", false}} {
		if got, ok := nameTenant(c.name); got != c.tenant || ok != c.ok {
			t.Errorf("nameTenant(%q) = %q, %v; want %q, %v", c.name, got, ok, c.tenant, c.ok)
		}
	}
	if got := shortJobName("vision", "@vision/train"); got != "train" {
		t.Errorf("short name of @vision/train: %q", got)
	}
	if err := checkGivenJobName(ops, "m", "@vision"); !errors.Is(err, transport.ErrInvalid) {
		t.Errorf("an administrator's malformed @ name: %v, want invalid", err)
	}

	// Every request that names a job is qualified.
	const given = "train"
	for _, req := range []api.JobNamed{
		api.DistributeRequest{Options: api.JobOptions{Name: given}}, api.JobRequest{Job: given},
		api.ReceiptsRequest{Job: given}, api.OffloadRequest{Job: given}, api.LeaseRequest{Job: given},
		api.ProduceRequest{Job: given}, api.EndTaskRequest{Job: given}, api.HandBackRequest{Job: given},
		api.DrainedRequest{Job: given}, api.FinishRequest{Job: given}, api.ShareStatsRequest{Job: given},
		api.OpStatsRequest{Job: given},
	} {
		got, err := qualifyRequest(alice, "m", req, qualifyJobName)
		if err != nil || got.JobName() != "@vision/train" {
			t.Errorf("%T qualified for alice: %q, %v; want @vision/train", req, got.JobName(), err)
		}
	}

	// Resolution against the state: the qualified job, else the
	// tenant's job of the bare name, else the bare name below the
	// protocol level, else the qualified name (a new job).
	jobs := map[string]string{"@vision/train": "vision", "legacy": "vision", "theirs": "nlp", "both": "vision", "@vision/both": "vision"}
	tenantOf := func(name string) (string, bool) { t, ok := jobs[name]; return t, ok }
	for _, c := range []struct {
		p       api.Principal
		given   string
		levelOK bool
		want    string
	}{
		{alice, "train", true, "@vision/train"},
		{alice, "train", false, "@vision/train"},
		{alice, "legacy", true, "legacy"},
		{alice, "both", true, "@vision/both"},
		{alice, "theirs", true, "@vision/theirs"},
		{alice, "theirs", false, "theirs"}, // the leader refuses it: another tenant's
		{alice, "new", true, "@vision/new"},
		{alice, "new", false, "new"},
		{carol, "train", true, "train"},
		{ops, "@vision/train", true, "@vision/train"},
		{alice, "@vision/train", true, "@vision/@vision/train"}, // refused on the leader, even her own
		{alice, "@vision/train", false, "@vision/@vision/train"},
	} {
		if got := resolveJobName(c.p, c.given, tenantOf, func() bool { return c.levelOK }); got != c.want {
			t.Errorf("%s names %q (level reached %v): %q, want %q", c.p.Name, c.given, c.levelOK, got, c.want)
		}
	}

	// Answers and errors, as alice sees them.
	info := displayAnswer(alice, []api.JobInfo{{Name: "@vision/train", Tenant: "vision"}}).([]api.JobInfo)
	if info[0].Name != "train" {
		t.Errorf("alice's job list names %q, want train", info[0].Name)
	}
	ac := []api.AutocacheInfo{{Decision: &api.AutocacheDecision{Job: "@nlp/train"}}, {Decision: &api.AutocacheDecision{Job: "@vision/prep"}}}
	shown := displayAnswer(alice, api.JobInfo{Name: "@vision/train", Autocache: ac}).(api.JobInfo)
	if shown.Autocache[0].Decision.Job != "" || shown.Autocache[1].Decision.Job != "prep" || ac[0].Decision.Job != "@nlp/train" {
		t.Errorf("alice sees autocache decisions by jobs %q and %q, want none (another tenant's) and prep; the original says %q", shown.Autocache[0].Decision.Job, shown.Autocache[1].Decision.Job, ac[0].Decision.Job)
	}
	if shown := displayAnswer(carol, api.JobInfo{Name: "x", Autocache: ac}).(api.JobInfo); shown.Autocache[0].Decision.Job != "" {
		t.Errorf("carol sees an autocache decision by job %q, want none (a tenant's)", shown.Autocache[0].Decision.Job)
	}
	st := displayAnswer(alice, api.WorkerOpStats{Tasks: []api.TaskOpStats{{Job: "@vision/train"}}}).(api.WorkerOpStats)
	if st.Tasks[0].Job != "train" {
		t.Errorf("alice's statistics name %q, want train", st.Tasks[0].Job)
	}
	for _, err := range []error{
		transport.Errorf(transport.ErrNotFound, "job %q not found", "@vision/@vision/x"),
		fmt.Errorf("apply: %w", transport.Errorf(transport.ErrNotFound, "job %q not found", "@vision/@vision/x")),
	} {
		got := displayError(alice, err)
		if !errors.Is(got, transport.ErrNotFound) || got.Error() != `not_found: job "@vision/x" not found` && got.Error() != `not_found: apply: not_found: job "@vision/x" not found` {
			t.Errorf("alice is told %q (%v), want the code kept and one prefix gone", got, err)
		}
	}
}
