package dataaccess

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil/jobtest"
	"github.com/feedmesh/feedmesh/mesh"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/pipeline/fn"
	"github.com/feedmesh/feedmesh/testcluster"
)

// tree is a data root and, beside it, a directory outside every root
// holding a secret (an /etc/shadow of the test's own), with the links a
// hostile tenant would hope for inside the root.
type tree struct {
	root, outside, secretFile, secret string
}

func newTree(t *testing.T) tree {
	t.Helper()
	base := t.TempDir()
	tr := tree{root: filepath.Join(base, "data"), outside: filepath.Join(base, "etc"), secret: secret(t)}
	tr.secretFile = filepath.Join(tr.outside, "shadow")
	for _, d := range []string{filepath.Join(tr.root, "corpus"), filepath.Join(tr.root, "images", "cat"), filepath.Join(tr.root, "classes", "cat"), tr.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(tr.secretFile, "root:"+tr.secret+":19000:0:99999:7:::\n", 0o600)
	write(filepath.Join(tr.outside, "cat.png"), tr.secret, 0o600)
	write(filepath.Join(tr.root, "corpus", "a.txt"), "hello\nworld\n", 0o644)
	write(filepath.Join(tr.root, "corpus", "b.txt"), "data\nroots\n", 0o644)
	links := map[string]string{
		"abs-link":            tr.secretFile,                        // absolute, out
		"rel-link":            filepath.Join("..", "etc", "shadow"), // relative, out
		"dir-link":            tr.outside,                           // a directory out
		"images/cat/leak.png": filepath.Join(tr.outside, "cat.png"), // an image out
		"classes/dog":         tr.outside,                           // a class directory out
		"corpus/c.txt":        tr.secretFile,                        // a link among the files a glob matches
		"corpus/in-link":      "a.txt",                              // stays inside: fine
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(tr.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func lines(paths ...string) *pipeline.Spec {
	return pipeline.NewSpec(pipeline.FromFiles("lines", paths...))
}

func wholeFile(paths ...string) *pipeline.Spec {
	return pipeline.NewSpec(pipeline.FromFiles("whole_file", paths...))
}

// TestSpecsReadOnlyUnderDataRoots (issue 37, item 1): a spec reads local
// files only under the node's data roots. Reading a file outside (an
// /etc/shadow of the test's own, mode 0600), through a symlink inside the
// root that points out (absolute, relative, a directory), through `..`,
// through /proc/self/root or /proc/self/cwd, as an image folder or as a
// tokenizer file, is answered with one generic permission_denied "not
// allowed" that says neither whether the file exists nor why; a path that
// does not exist outside the roots gets the same answer as one that does.
// The same reads under the root work.
func TestSpecsReadOnlyUnderDataRoots(t *testing.T) {
	tr := newTree(t)
	c := testcluster.Start(t, 3, dataAccess([]string{tr.root}, nil))
	cl := jobtest.Dial(t, c, 1)
	r := newRefusals(t, tr.outside, "matches no files")

	// Legitimate reads under the root: absolute, relative to it, a glob,
	// a link that stays inside.
	for _, p := range []string{filepath.Join(tr.root, "corpus", "a.txt"), "corpus/a.txt", filepath.Join(tr.root, "corpus", "[ab].txt"), "corpus/in-link"} {
		got, err := attempt(t, cl, lines(p))
		if err != nil || !bytes.Contains(got, []byte("hello")) {
			t.Errorf("%s under the root: %q, %v", p, got, err)
		}
	}

	attacks := []struct{ what, path string }{
		{"a file outside the roots", tr.secretFile},
		{"a glob outside the roots", filepath.Join(tr.outside, "*")},
		{"a file outside that does not exist", filepath.Join(tr.outside, "gshadow")},
		{"a glob outside that matches nothing", filepath.Join(tr.outside, "*.nothing")},
		{"an absolute symlink inside the root", filepath.Join(tr.root, "abs-link")},
		{"a relative symlink inside the root", filepath.Join(tr.root, "rel-link")},
		{"a relative symlink, relative path", "rel-link"},
		{"through a directory symlink", filepath.Join(tr.root, "dir-link", "shadow")},
		{"a glob through a directory symlink", filepath.Join(tr.root, "dir-link", "*")},
		{"a glob matching a symlink out", filepath.Join(tr.root, "corpus", "*.txt")},
		{"..", tr.root + "/../etc/shadow"},
		{".. relative to the root", "../etc/shadow"},
		{"/proc/self/root", "/proc/self/root" + tr.secretFile},
		{"/proc/self/cwd (the node's working directory is no root)", "/proc/self/cwd/files_test.go"},
		{"/proc/self/environ", "/proc/self/environ"},
		{"/proc/self/cwd/..", "/proc/self/cwd/../../etc/passwd"},
	}
	for _, a := range attacks {
		got, err := attempt(t, cl, wholeFile(a.path))
		name := a.path
		if a.what == "a glob matching a symlink out" {
			name = filepath.Join(tr.root, "corpus", "c.txt")
		}
		r.refused(a.what, name, tr.secret, got, err)
	}

	// An image folder with an image linked out, one whose class directory
	// is a link out, and one outside the roots.
	got, err := attempt(t, cl, pipeline.NewSpec(pipeline.FromFiles("image_folder", filepath.Join(tr.root, "images"))))
	r.refused("an image folder with an image linked out", filepath.Join(tr.root, "images", "cat", "leak.png"), tr.secret, got, err)
	got, err = attempt(t, cl, pipeline.NewSpec(pipeline.FromFiles("image_folder", filepath.Join(tr.root, "classes"))))
	r.refused("an image folder class linked out", filepath.Join(tr.root, "classes", "dog"), tr.secret, got, err)
	got, err = attempt(t, cl, pipeline.NewSpec(pipeline.FromFiles("image_folder", tr.outside)))
	r.refused("an image folder outside the roots", tr.outside, tr.secret, got, err)

	// Tokenizer files follow the same roots: one under the root is read
	// (named relative to it), and the parse error of a file outside would
	// leak its first bytes.
	tok, err := os.ReadFile(filepath.Join("..", "..", "pipeline", "fn", "testdata", "bpe", "gpt2-tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tr.root, "gpt2.json.gz"), tok, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 10})).
		Map("tokenize_bpe", fn.Args{"tokenizer": "gpt2.json.gz"}, 1)
	if got, err := attempt(t, cl, spec); err != nil || len(got) == 0 {
		t.Errorf("a tokenizer under the root: %d bytes, %v", len(got), err)
	}
	for _, a := range attacks[:3] {
		spec := pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 10})).
			Map("tokenize_bpe", fn.Args{"tokenizer": a.path}, 1)
		got, err := attempt(t, cl, spec)
		r.refused("tokenizer: "+a.what, a.path, tr.secret, got, err)
		spec = pipeline.NewSpec(pipeline.FromSynthetic(pipeline.SyntheticSource{Kind: "text", Count: 10})).
			Map("tokenize_tiktoken", fn.Args{"tokenizer": a.path, "encoding": "cl100k_base"}, 1)
		got, err = attempt(t, cl, spec)
		r.refused("tiktoken: "+a.what, a.path, tr.secret, got, err)
	}
	r.oneForm()
	if strings.Contains(tr.root, tr.outside) {
		t.Fatal("bad test tree")
	}
}

// TestWorkersCheckToo: the leader checks a spec's files when it registers
// the dataset, and each worker checks every file again when it opens it:
// a file of a registered dataset that became a link out of the root (a
// second job of the same spec is not listed again by the leader) is
// refused on the worker, and the job fails with the generic answer.
func TestWorkersCheckToo(t *testing.T) {
	tr := newTree(t)
	c := testcluster.Start(t, 2, dataAccess([]string{tr.root}, nil))
	cl := jobtest.Dial(t, c, 0)
	p := filepath.Join(tr.root, "corpus", "later.txt")
	if err := os.WriteFile(p, []byte("fine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := attempt(t, cl, wholeFile(p)); err != nil || !bytes.Contains(got, []byte("fine")) {
		t.Fatalf("first job: %q, %v", got, err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tr.secretFile, p); err != nil {
		t.Fatal(err)
	}
	got, err := attempt(t, cl, wholeFile(p))
	newRefusals(t, tr.outside).failed("a registered file turned into a link out", p, tr.secret, got, err)
}

// logSink is a node's log, kept as JSON lines for a test to search.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// refusals returns the "data access refused" records: name → reason.
func (s *logSink) refusals(t *testing.T) map[string]string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, line := range bytes.Split(s.buf.Bytes(), []byte("\n")) {
		var r struct{ Msg, Name, Reason, Component string }
		if json.Unmarshal(line, &r) != nil || r.Msg != "data access refused" {
			continue
		}
		if r.Component != "data-access" {
			t.Errorf("a refusal logged with component %q, want data-access: %s", r.Component, line)
		}
		out[r.Name] = r.Reason
	}
	return out
}

// TestRefusalsAreLoggedWithTheirReason (issue 37, item 1): the client's
// answer is the generic one, and the node's log has the detail the
// answer leaves out: which file, and why (outside the data roots, a
// `..`, a link out of its root), as a WARN line of the data-access
// component, rate-limited as every warning of a node is.
func TestRefusalsAreLoggedWithTheirReason(t *testing.T) {
	tr := newTree(t)
	var sink logSink
	c := testcluster.Start(t, 1, dataAccess([]string{tr.root}, nil), testcluster.WithConfig(func(_ int, cfg *mesh.Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}))
	cl := jobtest.Dial(t, c, 0)
	r := newRefusals(t, tr.outside)
	cases := []struct{ name, reason string }{
		{tr.secretFile, "outside the data roots"},
		{tr.root + "/../etc/shadow", "a `..` component"},
		{filepath.Join(tr.root, "abs-link"), "escapes"},
	} // at most logBurst (3) lines of one cause per 10 s are written: the rest are counted
	for _, cs := range cases {
		got, err := attempt(t, cl, wholeFile(cs.name))
		r.refused(cs.name, cs.name, tr.secret, got, err)
		if err != nil && strings.Contains(err.Error(), cs.reason) {
			t.Errorf("%s: the client was told the reason %q: %v", cs.name, cs.reason, err)
		}
	}
	r.oneForm()
	var logged map[string]string
	c.WaitFor(t, 10*time.Second, "the refusals in the node's log", func() bool {
		logged = sink.refusals(t)
		for _, cs := range cases {
			if !strings.Contains(logged[cs.name], cs.reason) {
				return false
			}
		}
		return true
	})
	for n, why := range logged {
		t.Logf("log: %s: %s", n, why)
	}
	if n := c.Node(0).LogCounts()[mesh.LogCountKey{Level: "WARN", Component: "data-access"}]; n < int64(len(cases)) {
		t.Errorf("the node counted %d data-access warnings, want at least %d", n, len(cases))
	}
}
