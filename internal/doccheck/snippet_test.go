package doccheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goBlocks returns the ```go blocks of a Markdown file.
func goBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// snippetProgram wraps a snippet that uses ctx, check and train, as the
// README's does, into a program.
const snippetProgram = `package main

import (
	"context"
	"log"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
)

var _ = pipeline.LoadFile

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func train(client.Batch) {}

func main() {
	ctx := context.Background()
%s
}
`

// TestReadmeGoSnippetCompiles: the Go examples of the README and of the
// reading guide compile against the current client and pipeline APIs
// (built through an overlay: nothing is written into the tree).
func TestReadmeGoSnippetCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"README.md", "docs/jobs/reading.md"} {
		blocks := goBlocks(t, filepath.Join(root, page))
		if len(blocks) == 0 {
			t.Errorf("%s has no Go example", page)
			continue
		}
		dir := t.TempDir()
		src := filepath.Join(dir, "main.go")
		if err := os.WriteFile(src, []byte(strings.Replace(snippetProgram, "%s", blocks[0], 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		virtual := filepath.Join(root, "internal", "doccheck", "readmesnippet", "main.go")
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{virtual: src}})
		ovFile := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ovFile, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goTool, "build", "-overlay", ovFile, "-o", filepath.Join(dir, "snippet"), "./internal/doccheck/readmesnippet")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: its first Go example does not compile: %v\n%s\nthe program:\n%s", page, err, out, strings.Replace(snippetProgram, "%s", blocks[0], 1))
		}
	}
}

// pythonSnippetCheck binds the README's Python example's calls to the
// package's signatures, without running it (that needs numpy, the library
// and a cluster): every keyword it passes to feedmesh.Client and to
// distribute is one they declare, and every method it calls on the client
// and the iterator exists.
const pythonSnippetCheck = `
import ast, inspect, sys
import feedmesh
tree = ast.parse(sys.stdin.read())
sigs = {"Client": inspect.signature(feedmesh.Client.__init__),
        "distribute": inspect.signature(feedmesh.Client.distribute)}
objs = {"client": feedmesh.Client, "it": feedmesh.Iterator}
bad = []
for node in ast.walk(tree):
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        continue
    name, owner = node.func.attr, node.func.value
    if name in sigs:
        try:
            sigs[name].bind(None, *node.args, **{k.arg: None for k in node.keywords})
        except TypeError as e:
            bad.append("%s(...): %s" % (name, e))
    elif isinstance(owner, ast.Name) and owner.id in objs and not hasattr(objs[owner.id], name):
        bad.append("%s.%s: no such method" % (owner.id, name))
print("\n".join(bad))
sys.exit(1 if bad else 0)
`

// TestReadmePythonSnippetMatchesTheAPI checks the README's Python example
// against python/feedmesh (import feedmesh needs only the standard
// library).
func TestReadmePythonSnippetMatchesTheAPI(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```python\n")
	snippet, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no Python example")
	}
	cmd := exec.Command(py, "-c", pythonSnippetCheck)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "python"))
	cmd.Stdin = strings.NewReader(snippet)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the README's Python example does not match python/feedmesh: %v\n%s", err, out)
	}
}
