// Package doccheck checks the repository's Markdown documentation: every
// relative link (and image) points at a file that exists, every anchor
// (#...) at a heading of the page it names, and every directory of docs/
// has an index that lists its pages. The checks run as a test of this
// package (go test ./internal/doccheck), so a moved or renamed page, or a
// renamed heading, fails the build instead of leaving a dead link. The
// tests also keep the README short and its examples true: its Go example
// must compile, and its Python example must call the package with the
// keywords it declares.
package doccheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Problem is one broken link or missing index entry, at a file and line.
type Problem struct {
	File string // slash-separated, relative to the root
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
}

// MarkdownFiles lists the .md files under root (slash-separated, relative
// to root, sorted), leaving out hidden directories and testdata.
func MarkdownFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// link is one link target found in a page.
type link struct {
	line   int
	target string
}

var (
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// page is what a Markdown file offers and asks for: its links and the
// anchors of its headings.
type page struct {
	links   []link
	anchors map[string]bool
}

// parse reads a Markdown file's links (outside code blocks and code
// spans) and its headings' anchors, as GitHub makes them.
func parse(path string) (*page, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &page{anchors: map[string]bool{}}
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			a := Anchor(m[2])
			if k := seen[a]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				p.anchors[a] = true
			}
			seen[a]++
		}
		text := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			p.links = append(p.links, link{n, m[1]})
		}
		if m := refDef.FindStringSubmatch(text); m != nil {
			p.links = append(p.links, link{n, m[1]})
		}
	}
	return p, sc.Err()
}

var markup = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// Anchor is the anchor GitHub gives a heading's text: lower case, links
// reduced to their text, punctuation but '-' and '_' dropped, spaces made
// '-'. (A repeated heading gets -1, -2, … after it.)
func Anchor(text string) string {
	text = markup.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Links checks every relative link of the given files (relative to root):
// the file or directory it names exists, and an anchor names a heading
// of the Markdown page it points to (or of the page itself).
func Links(root string, files []string) ([]Problem, error) {
	pages := map[string]*page{}
	load := func(rel string) (*page, error) {
		if p, ok := pages[rel]; ok {
			return p, nil
		}
		p, err := parse(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		pages[rel] = p
		return p, nil
	}
	var problems []Problem
	for _, file := range files {
		p, err := load(file)
		if err != nil {
			return nil, err
		}
		for _, l := range p.links {
			if msg := check(root, file, l.target, load); msg != "" {
				problems = append(problems, Problem{file, l.line, msg})
			}
		}
	}
	return problems, nil
}

// check returns what is wrong with target, a link of file, or "".
func check(root, file, target string, load func(string) (*page, error)) string {
	if u, err := url.Parse(target); err == nil && (u.Scheme != "" || strings.HasPrefix(target, "//")) {
		return "" // absolute: not ours to check
	}
	pathPart, anchor, _ := strings.Cut(target, "#")
	if p, err := url.PathUnescape(pathPart); err == nil {
		pathPart = p
	}
	dest := file
	if pathPart != "" {
		if strings.HasPrefix(pathPart, "/") {
			dest = strings.TrimPrefix(pathPart, "/")
		} else {
			dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), pathPart))
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return fmt.Sprintf("link %q leaves the repository", target)
		}
		st, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest)))
		if err != nil {
			return fmt.Sprintf("link %q: no file %s", target, dest)
		}
		if st.IsDir() {
			if anchor != "" {
				return fmt.Sprintf("link %q: an anchor into a directory", target)
			}
			return ""
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	p, err := load(dest)
	if err != nil {
		return fmt.Sprintf("link %q: %v", target, err)
	}
	if !p.anchors[anchor] {
		return fmt.Sprintf("link %q: %s has no heading with anchor #%s", target, dest, anchor)
	}
	return ""
}

// IndexNames are the names a directory's index may have.
var IndexNames = []string{"README.md", "index.md"}

// Indexes checks that every directory under dir (relative to root, dir
// included) has an index page that links to each of its other Markdown
// pages and to each of its subdirectories (or their index).
func Indexes(root, dir string) ([]Problem, error) {
	var problems []Problem
	err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(dir)), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		index := ""
		for _, n := range IndexNames {
			if _, err := os.Stat(filepath.Join(path, n)); err == nil {
				index = n
				break
			}
		}
		var want []string // what the index must link to
		for _, e := range entries {
			switch {
			case e.IsDir():
				want = append(want, e.Name())
			case strings.HasSuffix(e.Name(), ".md") && e.Name() != index:
				want = append(want, e.Name())
			}
		}
		if index == "" {
			if len(want) > 0 {
				problems = append(problems, Problem{rel, 0, fmt.Sprintf("no index (%s) listing its pages", strings.Join(IndexNames, " or "))})
			}
			return nil
		}
		p, err := parse(filepath.Join(path, index))
		if err != nil {
			return err
		}
		linked := map[string]bool{}
		for _, l := range p.links {
			target, _, _ := strings.Cut(l.target, "#")
			target = strings.TrimPrefix(strings.TrimPrefix(target, "./"), "/")
			first, _, _ := strings.Cut(target, "/")
			linked[first] = true
		}
		for _, w := range want {
			if !linked[w] {
				problems = append(problems, Problem{rel + "/" + index, 0, fmt.Sprintf("does not link to %s", w)})
			}
		}
		return nil
	})
	return problems, err
}
