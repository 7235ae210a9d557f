package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// TestDocLinks: every relative link and image of every Markdown file of
// the repository (README.md, docs/**, the packages' own pages) resolves
// to a file that exists, and every anchor to a heading of its page.
func TestDocLinks(t *testing.T) {
	files, err := MarkdownFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"README.md", "docs/README.md", "docs/operating/flags.md"} {
		found := false
		for _, f := range files {
			found = found || f == must
		}
		if !found {
			t.Fatalf("%s not among the Markdown files found: %v", must, files)
		}
	}
	problems, err := Links(repoRoot, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("checked the links of %d files", len(files))
}

// TestDocIndexes: every directory of docs/ has an index that lists its
// pages and its subdirectories.
func TestDocIndexes(t *testing.T) {
	problems, err := Indexes(repoRoot, "docs")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestReadmeIsShort: the README is the first page, not the manual: at
// most 200 lines, the rest is in docs/.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 200 {
		t.Errorf("README.md has %d lines; keep it at most 200 and put the rest in docs/", n)
	}
}

func TestAnchor(t *testing.T) {
	for text, want := range map[string]string{
		"Metrics, the status page and `feedmesh top`": "metrics-the-status-page-and-feedmesh-top",
		"Autotuning: `parallelism: auto`":             "autotuning-parallelism-auto",
		"feedmesh tls ca create":                      "feedmesh-tls-ca-create",
		"Stopping a node: the drain":                  "stopping-a-node-the-drain",
		"Exactly-once delivery (DYNAMIC)":             "exactly-once-delivery-dynamic",
		"See [the spec](spec.md) here":                "see-the-spec-here",
		"offload_boundary × 2":                        "offload_boundary--2",
	} {
		if got := Anchor(text); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestLinksFindsBrokenOnes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n[ok](docs/a.md#a-heading) [dir](docs) [self](#top) [web](https://example.com/x)\n"+
		"[gone](docs/gone.md) [bad anchor](docs/a.md#nope) `[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n"+
		"![img](docs/pic.png)\n[ref]: docs/missing.md\n")
	write("docs/a.md", "# A heading\n\n## Twice\n\n## Twice\n\n[up](../README.md#top) [second](#twice-1) [out](../../x.md)\n")
	write("docs/README.md", "# Docs\n\n[a](a.md)\n")
	write("docs/sub/b.md", "# B\n")
	files, err := MarkdownFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := Links(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		`README.md:4: link "docs/gone.md": no file docs/gone.md`,
		`README.md:4: link "docs/a.md#nope": docs/a.md has no heading with anchor #nope`,
		`README.md:9: link "docs/pic.png": no file docs/pic.png`,
		`README.md:10: link "docs/missing.md": no file docs/missing.md`,
		`docs/a.md:7: link "../../x.md" leaves the repository`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	idx, err := Indexes(dir, "docs")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 2 || !strings.Contains(idx[0].String(), "does not link to sub") || !strings.Contains(idx[1].String(), "docs/sub: no index") {
		t.Errorf("index problems: %v", idx)
	}
}
