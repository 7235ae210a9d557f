package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// committedReference is docs/operating/flags.md as the repository has it.
func committedReference(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(referencePath)))
	if err != nil {
		t.Fatalf("the flag reference: %v", err)
	}
	return string(b)
}

// TestFlagReferenceUpToDate: the committed flag reference is what
// `feedmesh help-reference` writes now, so it cannot go stale.
func TestFlagReferenceUpToDate(t *testing.T) {
	var b bytes.Buffer
	if err := writeReference(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	want, got := b.String(), committedReference(t)
	if got == want {
		return
	}
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			t.Fatalf("%s is stale: run `go run ./cmd/feedmesh help-reference --out %s` (or go generate ./cmd/feedmesh)\nfirst difference, line %d:\ncommitted: %s\ngenerated: %s",
				referencePath, referencePath, i+1, g, w)
		}
	}
}

// TestFlagReferenceHasEveryFlag: every command, and every flag its --help
// prints (read from the text the flag package prints, not from the
// generator), has its place in the committed reference, under that
// command's heading.
func TestFlagReferenceHasEveryFlag(t *testing.T) {
	ref := committedReference(t)
	sections := map[string]string{} // "feedmesh tls ca create" -> its section
	parts := regexp.MustCompile(`(?m)^## `).Split(ref, -1)
	for _, p := range parts[1:] {
		head, body, _ := strings.Cut(p, "\n")
		sections[strings.TrimSpace(head)] = body
	}
	flagLine := regexp.MustCompile(`(?m)^  -(\S+)`)
	var commands [][]string
	for _, name := range prog.Names() {
		commands = append(commands, []string{name})
		c, _ := prog.Lookup(name)
		for _, n := range c.Nested {
			commands = append(commands, append([]string{name}, strings.Fields(n)...))
		}
	}
	if _, ok := prog.Lookup("tls"); !ok || len(commands) < len(prog.Names())+2 {
		t.Fatalf("commands %v: want tls ca create and tls cert create among them", commands)
	}
	flags := 0
	for _, words := range commands {
		name := "feedmesh " + strings.Join(words, " ")
		section, ok := sections[name]
		if !ok {
			t.Errorf("%s has no section in %s", name, referencePath)
			continue
		}
		_, errOut, code := runCmd(t, append(append([]string(nil), words...), "--help")...)
		if code != 0 {
			t.Errorf("%s --help: exit %d: %s", name, code, errOut)
			continue
		}
		for _, m := range flagLine.FindAllStringSubmatch(errOut, -1) {
			flags++
			if !strings.Contains(section, "| `--"+m[1]+"`") && !strings.Contains(section, "| `--"+m[1]+" ") {
				t.Errorf("%s --%s is not in its section of %s", name, m[1], referencePath)
			}
		}
	}
	if flags < 100 {
		t.Errorf("found %d flags in the commands' --help; the parsing of their text is broken", flags)
	}
}
