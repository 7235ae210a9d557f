package diagnose

import (
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/pipeline"
)

const specYAML = `# a misconfigured pipeline
source:
  range: {stop: 1000}
ops:
  - map: {fn: cast, args: {tensor: value, dtype: float32}}
  - map: {fn: cost, args: {cpu_us: 100}, parallelism: 1}  # the expensive one
  - batch: {size: 10}
`

const specJSON = `{"source": {"range": {"stop": 1000}}, "ops": [
  {"map": {"fn": "cast", "args": {"tensor": "value", "dtype": "float32"}}},
  {"map": {"fn": "cost", "args": {"cpu_us": 100}, "parallelism": 1}},
  {"batch": {"size": 10}}]}`

// TestRewriteYAML: the rewritten text decodes to exactly the spec Rewrite
// makes (same fingerprint), differs from the original only in the plan's
// knobs, and keeps the comments.
func TestRewriteYAML(t *testing.T) {
	plan := Plan{Parallelism: map[int]int{1: 4}, PrefetchAfter: []int{-1, 2}}
	for name, text := range map[string]string{"yaml": specYAML, "json": specJSON} {
		t.Run(name, func(t *testing.T) {
			orig, err := pipeline.ParseYAML([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			want, err := Rewrite(orig, plan)
			if err != nil {
				t.Fatal(err)
			}
			out, err := RewriteYAML([]byte(text), plan, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pipeline.ParseYAML(out)
			if err != nil {
				t.Fatalf("rewritten spec does not validate: %v\n%s", err, out)
			}
			fpGot, _ := got.Fingerprint()
			fpWant, _ := want.Fingerprint()
			fpOrig, _ := orig.Fingerprint()
			if fpGot != fpWant || fpGot == fpOrig {
				t.Fatalf("fingerprint %s, want %s (original %s)\n%s", fpGot, fpWant, fpOrig, out)
			}
			if len(got.Ops) != 5 || got.Ops[0].Prefetch == nil || got.Ops[4].Prefetch == nil ||
				got.Ops[2].Map.Parallelism != 4 || got.Ops[1].Map.Parallelism != 0 {
				t.Errorf("rewritten ops: %s", out)
			}
			if name == "yaml" && (!strings.Contains(string(out), "# a misconfigured pipeline") || !strings.Contains(string(out), "# the expensive one")) {
				t.Errorf("comments lost:\n%s", out)
			}
			if orig.Ops[1].Map.Parallelism != 1 || len(orig.Ops) != 3 {
				t.Error("Rewrite modified its input")
			}
		})
	}
}

func TestRewriteYAMLPathsAndEmptyOps(t *testing.T) {
	text := "source:\n  files: {paths: [a/*.txt, /abs/b.txt], format: lines}\n"
	out, err := RewriteYAML([]byte(text), Plan{PrefetchAfter: []int{-1}}, func(p string) string {
		if strings.HasPrefix(p, "/") {
			return p
		}
		return "/base/" + p
	})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.Contains(s, `"/base/a/*.txt"`) || !strings.Contains(s, `"/abs/b.txt"`) || !strings.Contains(s, "prefetch") {
		t.Errorf("rewritten:\n%s", s)
	}
}

func TestRewriteRejectsABadPlan(t *testing.T) {
	spec, err := pipeline.ParseYAML([]byte(specYAML))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Plan{
		{Parallelism: map[int]int{2: 4}},    // a batch
		{Parallelism: map[int]int{1: 0}},    // parallelism 0
		{Parallelism: map[int]int{7: 2}},    // no such op
		{PrefetchAfter: []int{3}},           // past the end
		{Parallelism: map[int]int{1: 2000}}, // above MaxParallelism
	} {
		if _, err := Rewrite(spec, p); err == nil {
			t.Errorf("Rewrite(%+v): no error", p)
		}
	}
	if _, err := RewriteYAML([]byte("- not a mapping"), Plan{}, nil); err == nil {
		t.Error("RewriteYAML of a list: no error")
	}
}
