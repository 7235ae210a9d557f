package objstore

import (
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// globLocal expands a local pattern.
func (a *Access) globLocal(pattern string) ([]string, error) {
	if a.local.all {
		return filepath.Glob(pattern)
	}
	res, err := a.resolve(pattern)
	if err != nil {
		return nil, err
	}
	if _, err := path.Match(res.rel, ""); err != nil {
		return nil, err
	}
	rels, err := globRoot(res.root, res.rel)
	if err != nil {
		return nil, a.deny(pattern, err.Error())
	}
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = res.name(r)
	}
	sort.Strings(out)
	return out, nil
}

// globRoot is fs.Glob in a root, except that a directory the pattern
// names literally that cannot be read for another reason than its absence
// (a link out of the root, a permission) is an error, not a directory
// without matches (one a wildcard matched is skipped, as fs.Glob skips
// it), and that the protected paths are not listed.
func globRoot(r *dataRoot, pattern string) ([]string, error) {
	if !HasMeta(pattern) {
		if _, err := r.r.Stat(pattern); err != nil {
			if notFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return []string{pattern}, nil
	}
	dir, file := path.Split(pattern)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	if !HasMeta(dir) {
		return globDir(r, dir, file, nil, true)
	}
	if dir == pattern {
		return nil, path.ErrBadPattern
	}
	dirs, err := globRoot(r, dir)
	if err != nil {
		return nil, err
	}
	var m []string
	for _, d := range dirs {
		if m, err = globDir(r, d, file, m, false); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func globDir(r *dataRoot, dir, pattern string, m []string, literal bool) ([]string, error) {
	ents, err := fs.ReadDir(r.r.FS(), dir)
	if err != nil {
		if notFound(err) || !literal {
			return m, nil
		}
		return m, err
	}
	for _, e := range ents {
		if ok, _ := path.Match(pattern, e.Name()); !ok {
			continue
		}
		p := path.Join(dir, e.Name())
		if r.excludedAt(p) == "" {
			m = append(m, p)
		}
	}
	return m, nil
}
