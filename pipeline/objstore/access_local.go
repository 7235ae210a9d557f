package objstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// localFiles is the local part of a policy: all files, or data roots.
type localFiles struct {
	all       bool
	view      bool // a narrowed policy's (Access.Narrow): its roots are another's
	roots     []*dataRoot
	protected []protectedPath
	ids       *protectedIDs
}

// protectedRecheck is how old the protected files' identities may be
// when an opened file with a single link is compared with them: a file
// with more than one link (a hard link may be one of them) is compared
// with identities taken then. So only a bind mount of a protected file
// replaced (a key rotated) less than this long ago could go unnoticed.
const protectedRecheck = time.Second

// protectedIDs are the protected files' identities (os.SameFile), taken
// at most protectedRecheck ago: an open compares with them instead of
// taking each protected file's stat again (5 stats were 40 % of what
// opening a small file under a data root cost).
type protectedIDs struct {
	mu  sync.Mutex
	at  time.Time
	fis []fs.FileInfo // parallel to localFiles.protected; nil: no such file
}

// dataRoot is one data root, opened.
type dataRoot struct {
	// name is what a policy's grant calls the root (Grant.Roots): the
	// NAME of --data-root NAME=DIR, else the directory's base name.
	name string
	// forms are the absolute, clean paths that name the root: as
	// configured, then its real path (symbolic links resolved) when it
	// differs. A spec's absolute path names the root by either.
	forms []string
	real  string
	r     *os.Root
	// excluded are the protected paths inside an implicit root, relative
	// to it (slash-separated).
	excluded []excludedPath
	// hideDot: an implicit root (a dev-mode node's current directory)
	// leaves out its hidden entries (a name starting with '.': .ssh,
	// .git, .env, .aws), also reached through a link; a root the
	// operator names shows them.
	hideDot bool
}

// hiddenWhat is what excludedAt says of a hidden entry of an implicit
// root.
const hiddenWhat = "a hidden entry (a name starting with '.'), which the default data root (the current directory) leaves out: give --data-root to read it"

// hiddenIn tells whether a slash-separated relative path has a
// component starting with '.' (other than "." and "..").
func hiddenIn(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if len(c) > 1 && c[0] == '.' && c != ".." {
			return true
		}
	}
	return false
}

type excludedPath struct{ rel, what string }

type protectedPath struct {
	path, real, what string
}

// pseudoFS are the kernel's views of processes and devices: no root may
// hold them or lie inside them.
var pseudoFS = []string{"/proc", "/sys", "/dev"}

func newLocalFiles(cfg AccessConfig, log *slog.Logger) (localFiles, error) {
	lf := localFiles{all: cfg.AllLocalFiles, ids: &protectedIDs{}}
	if cfg.AllLocalFiles {
		if len(cfg.Roots) > 0 {
			return lf, errors.New("data roots: AllLocalFiles reads every file, give no roots with it")
		}
		return lf, nil
	}
	for _, p := range cfg.Protected {
		if p.Path == "" {
			continue
		}
		abs, err := filepath.Abs(p.Path)
		if err != nil {
			return lf, fmt.Errorf("%s %s: %w", p.What, p.Path, err)
		}
		lf.protected = append(lf.protected, protectedPath{path: abs, real: realPath(abs), what: p.What})
	}
	if len(cfg.Roots) > 0 {
		for _, r := range cfg.Roots {
			dr, err := lf.openRoot(r, false)
			if err != nil {
				lf.close()
				return lf, err
			}
			lf.roots = append(lf.roots, dr)
		}
		return lf, nil
	}
	if cfg.ImplicitRoot != "" {
		dr, err := lf.openRoot(cfg.ImplicitRoot, true)
		if err != nil {
			log.Warn("no default data root: specs read no local files (give --data-root)", "err", err)
			return lf, nil
		}
		lf.roots = append(lf.roots, dr)
	}
	return lf, nil
}

func (lf *localFiles) close() {
	if lf.view {
		return
	}
	for _, r := range lf.roots {
		r.r.Close()
	}
}

// realPath is abs with its symbolic links resolved, as far as it exists.
func realPath(abs string) string {
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	dir := filepath.Dir(abs)
	if dir == abs {
		return abs
	}
	return filepath.Join(realPath(dir), filepath.Base(abs))
}

// within tells whether p is dir or lies under it (both absolute, clean).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// openRoot checks and opens a data root.
func (lf *localFiles) openRoot(given string, implicit bool) (*dataRoot, error) {
	name, given := rootName(given)
	abs, err := filepath.Abs(given)
	if err != nil {
		return nil, fmt.Errorf("data root %s: %w", given, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("data root %s: %w", given, err)
	}
	if st, err := os.Stat(real); err != nil {
		return nil, fmt.Errorf("data root %s: %w", given, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("data root %s: not a directory", given)
	}
	for _, sys := range pseudoFS {
		if within(real, sys) || within(sys, real) {
			return nil, fmt.Errorf("data root %s holds or lies inside %s, the kernel's view of processes and devices (a spec could read the node's memory, environment and keys there): choose a directory that holds only data", given, sys)
		}
	}
	if name == "" {
		name = filepath.Base(abs)
	}
	dr := &dataRoot{name: name, forms: []string{abs}, real: real, hideDot: implicit}
	if real != abs {
		dr.forms = append(dr.forms, real)
	}
	for _, p := range lf.protected {
		if within(real, p.real) {
			return nil, fmt.Errorf("data root %s lies inside %s %s: a spec could read it; choose a directory that holds only data", given, p.what, p.path)
		}
		if within(p.real, real) {
			if !implicit {
				return nil, fmt.Errorf("data root %s holds %s %s: a spec could read it; choose data roots that hold only data, or move it out of them", given, p.what, p.path)
			}
			rel, _ := filepath.Rel(real, p.real)
			dr.excluded = append(dr.excluded, excludedPath{rel: filepath.ToSlash(rel), what: p.what})
		}
	}
	if dr.r, err = os.OpenRoot(real); err != nil {
		return nil, fmt.Errorf("data root %s: %w", given, err)
	}
	return dr, nil
}

// excludedAt returns what a protected path at or above rel (relative to
// the root, slash-separated) is, or "".
func (r *dataRoot) excludedAt(rel string) string {
	if r.hideDot && hiddenIn(rel) {
		return hiddenWhat
	}
	for _, e := range r.excluded {
		if rel == e.rel || strings.HasPrefix(rel, e.rel+"/") {
			return e.what
		}
	}
	return ""
}

// resolved is a spec's local path located in a root.
type resolved struct {
	root *dataRoot
	// rel is the path relative to the root, slash-separated ("." for the
	// root itself).
	rel string
	// prefix is what the spec's absolute names start with (the root's
	// form it used), "" for a relative name.
	prefix string
}

// name is the name the spec would give the path rel of the same root.
func (r resolved) name(rel string) string {
	if r.prefix == "" {
		return filepath.FromSlash(rel)
	}
	if rel == "." {
		return r.prefix
	}
	return filepath.Join(r.prefix, filepath.FromSlash(rel))
}

// resolve locates a spec's path, or says why it is refused (lexically:
// nothing is looked up, so the answer does not depend on what exists).
func (lf *localFiles) resolve(name string) (resolved, string) {
	if name == "" {
		return resolved{}, "empty path"
	}
	for _, c := range strings.Split(filepath.ToSlash(name), "/") {
		if c == ".." {
			return resolved{}, "a `..` component"
		}
	}
	if len(lf.roots) == 0 {
		return resolved{}, "no data roots"
	}
	clean := filepath.Clean(name)
	var res resolved
	if filepath.IsAbs(clean) {
		found := false
		for _, r := range lf.roots {
			for _, f := range r.forms {
				if within(clean, f) {
					rel, err := filepath.Rel(f, clean)
					if err != nil {
						continue
					}
					res, found = resolved{root: r, rel: filepath.ToSlash(rel), prefix: f}, true
					break
				}
			}
			if found {
				break
			}
		}
		if !found {
			return resolved{}, "outside the data roots"
		}
	} else {
		res = resolved{root: lf.roots[0], rel: filepath.ToSlash(clean)}
	}
	if what := res.root.excludedAt(res.rel); what != "" {
		return resolved{}, "is or lies under " + what + ", left out of the data root"
	}
	return res, ""
}

// notFound tells whether err means the path does not exist (or a
// component of it is a file).
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// fsErr is a failed operation's answer: not found, or a refusal (a link
// out of the root, a permission error: what the log says).
func (a *Access) fsErr(op, name string, err error) error {
	if notFound(err) {
		return notExist(op, name)
	}
	return a.deny(name, err.Error())
}

func (a *Access) resolve(name string) (resolved, error) {
	res, why := a.local.resolve(name)
	if why != "" {
		return res, a.deny(name, why)
	}
	return res, nil
}

// protectedInfos returns the protected files' identities: taken now
// when fresh, else at most protectedRecheck ago.
func (lf *localFiles) protectedInfos(fresh bool) []fs.FileInfo {
	lf.ids.mu.Lock()
	defer lf.ids.mu.Unlock()
	if now := time.Now(); fresh || lf.ids.fis == nil || now.Sub(lf.ids.at) >= protectedRecheck {
		fis := make([]fs.FileInfo, len(lf.protected))
		for i, p := range lf.protected {
			if st, err := os.Stat(p.path); err == nil {
				fis[i] = st
			}
		}
		lf.ids.fis, lf.ids.at = fis, now
	}
	return lf.ids.fis
}

// checkOpened refuses what a path reached through links or other names:
// a protected file (the same file: a hard link too), or, in a root with
// protected paths inside, anything under them.
func (a *Access) checkOpened(res resolved, fi fs.FileInfo) string {
	if len(a.local.protected) > 0 {
		for i, st := range a.local.protectedInfos(multiplyLinked(fi)) {
			if st != nil && os.SameFile(st, fi) {
				p := a.local.protected[i]
				return "is " + p.what + " " + p.path
			}
		}
	}
	if len(res.root.excluded) > 0 || res.root.hideDot {
		real, err := filepath.EvalSymlinks(filepath.Join(res.root.real, filepath.FromSlash(res.rel)))
		if err != nil {
			return "cannot resolve it to check it: " + err.Error()
		}
		if rel, err := filepath.Rel(res.root.real, real); res.root.hideDot && err == nil && hiddenIn(filepath.ToSlash(rel)) {
			return "resolves to " + real + ", " + hiddenWhat
		}
		for _, p := range a.local.protected {
			if within(real, p.real) {
				return "resolves to " + real + ", under " + p.what
			}
		}
	}
	return ""
}

// Stat is os.Stat of a local path under the policy.
func (a *Access) Stat(name string) (fs.FileInfo, error) {
	if a.local.all {
		return os.Stat(name)
	}
	res, err := a.resolve(name)
	if err != nil {
		return nil, err
	}
	fi, err := res.root.r.Stat(res.rel)
	if err != nil {
		return nil, a.fsErr("stat", name, err)
	}
	if why := a.checkOpened(res, fi); why != "" {
		return nil, a.deny(name, why)
	}
	return fi, nil
}

// OpenFile is os.Open of a local path under the policy.
func (a *Access) OpenFile(name string) (*os.File, error) {
	if a.local.all {
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", name, ErrNotFound)
		}
		return f, err
	}
	res, err := a.resolve(name)
	if err != nil {
		return nil, err
	}
	f, err := res.root.r.Open(res.rel)
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("%s: %w", name, ErrNotFound)
		}
		return nil, a.deny(name, err.Error())
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, a.deny(name, err.Error())
	}
	if why := a.checkOpened(res, fi); why != "" {
		f.Close()
		return nil, a.deny(name, why)
	}
	return f, nil
}

// ReadDir is os.ReadDir of a local directory under the policy (the
// protected paths inside an implicit root are not listed).
func (a *Access) ReadDir(name string) ([]fs.DirEntry, error) {
	if a.local.all {
		return os.ReadDir(name)
	}
	res, err := a.resolve(name)
	if err != nil {
		return nil, err
	}
	if _, err := a.Stat(name); err != nil {
		return nil, err
	}
	ents, err := fs.ReadDir(res.root.r.FS(), res.rel)
	if err != nil {
		return nil, a.fsErr("readdir", name, err)
	}
	out := ents[:0]
	for _, e := range ents {
		if res.root.excludedAt(path.Join(res.rel, e.Name())) == "" {
			out = append(out, e)
		}
	}
	return out, nil
}

// WalkDir is filepath.WalkDir of a local directory under the policy: fn
// gets the names a spec would give the paths; the protected paths inside
// an implicit root are skipped; symbolic links are not followed (as
// filepath.WalkDir).
func (a *Access) WalkDir(name string, fn fs.WalkDirFunc) error {
	if a.local.all {
		return filepath.WalkDir(name, fn)
	}
	res, err := a.resolve(name)
	if err != nil {
		return err
	}
	if _, err := a.Stat(name); err != nil {
		return fn(name, nil, err)
	}
	return fs.WalkDir(res.root.r.FS(), res.rel, func(p string, d fs.DirEntry, err error) error {
		if res.root.excludedAt(p) != "" {
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err != nil {
			err = a.fsErr("walk", res.name(p), err)
		}
		return fn(res.name(p), d, err)
	})
}
