package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunLocalDataFlags: run-local, the user's own process, reads every
// file the user may by default, and only under --data-root when given
// (`..` and files outside refused with the generic answer); a spec naming
// an object-store endpoint is refused, saying how to name a store; a bad
// --object-store is refused.
func TestRunLocalDataFlags(t *testing.T) {
	dir := t.TempDir()
	data, outside := filepath.Join(dir, "data"), filepath.Join(dir, "outside")
	os.MkdirAll(data, 0o755)
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(data, "a.txt"), []byte("a\nb\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s\n"), 0o600)
	spec := func(name, paths string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("source:\n  files: {paths: ["+paths+"], format: lines}\n"), 0o644)
		return p
	}
	inside := spec("in.yaml", `"data/a.txt"`)
	out := spec("out.yaml", `"outside/secret.txt"`)
	dots := spec("dots.yaml", `"data/../outside/secret.txt"`)

	for _, s := range []string{inside, out} {
		if _, errOut, code := runCmd(t, "run-local", s, "--json"); code != 0 {
			t.Errorf("%s with no --data-root: exit %d: %s", s, code, errOut)
		}
	}
	if _, errOut, code := runCmd(t, "run-local", inside, "--json", "--data-root", data); code != 0 {
		t.Errorf("a file under --data-root: exit %d: %s", code, errOut)
	}
	for _, s := range []string{out, dots} {
		_, errOut, code := runCmd(t, "run-local", s, "--data-root", data)
		if code == 0 || !strings.Contains(errOut, "not allowed") {
			t.Errorf("%s outside --data-root: exit %d: %s", s, code, errOut)
		}
	}
	ep := filepath.Join(dir, "ep.yaml")
	os.WriteFile(ep, []byte("source:\n  files: {paths: [\"s3://b/k.parquet\"], format: parquet, object_store: {endpoint: \"http://127.0.0.1:1\"}}\n"), 0o644)
	if _, errOut, code := runCmd(t, "run-local", ep); code == 0 || !strings.Contains(errOut, "--object-store NAME=endpoint=") {
		t.Errorf("an endpoint in the spec: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCmd(t, "run-local", inside, "--object-store", "Bad=endpoint=x"); code == 0 || !strings.Contains(errOut, "--object-store") {
		t.Errorf("a bad --object-store: exit %d: %s", code, errOut)
	}
}
