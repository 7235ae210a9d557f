package fn

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/tensor"
)

// FnContext is what a map or filter function knows about the element it is
// given. Random functions must draw only from Rand so that their output is
// reproducible per (seed, split, element index).
type FnContext struct {
	// Seed is the op's seed (from the spec, or derived from the dataset seed).
	Seed uint64
	// SplitID identifies the split the element came from.
	SplitID int64
	// Index is the element's position within its split.
	Index int64
}

// Rand returns a generator seeded from (Seed, SplitID, Index).
func (c *FnContext) Rand() *rand.Rand {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(c.SplitID))
	s1 := c.Seed ^ 0x9e3779b97f4a7c15*uint64(c.SplitID+1)
	s2 := uint64(c.Index)*0xbf58476d1ce4e5b9 ^ c.Seed<<1
	return rand.New(rand.NewPCG(s1, s2))
}

// MapFn transforms one element. It may reuse the input's buffers for the
// output but must not keep references to them after returning an error.
type MapFn func(ctx *FnContext, e tensor.Element) (tensor.Element, error)

// FilterFn reports whether an element is kept.
type FilterFn func(ctx *FnContext, e tensor.Element) (bool, error)

// MapFactory validates a function's args and builds the function. It is
// called when a spec is validated, so a bad argument is reported before
// anything runs.
type MapFactory func(args Args) (MapFn, error)

// FileMapFactory is a MapFactory whose args name files (a tokenizer's):
// it opens them through files, the data-access policy of whoever runs the
// spec (a node's data roots, allowed hosts and named stores; a user's own
// process reads as it may). files is nil when the spec is only checked
// (validated): the factory then checks its args, opens nothing and
// returns a function that is never run.
type FileMapFactory func(files *objstore.Access, args Args) (MapFn, error)

// FilterFactory is MapFactory's twin for filters.
type FilterFactory func(args Args) (FilterFn, error)

var registry = struct {
	sync.RWMutex
	maps    map[string]FileMapFactory
	filters map[string]FilterFactory
}{maps: map[string]FileMapFactory{}, filters: map[string]FilterFactory{}}

// RegisterMap registers a map function that takes no args. Programs that
// embed feedmesh call it from init or main before opening pipelines.
func RegisterMap(name string, fn MapFn) {
	RegisterMapFactory(name, func(args Args) (MapFn, error) {
		if len(args) != 0 {
			return nil, fmt.Errorf("map function %q takes no args", name)
		}
		return fn, nil
	})
}

// RegisterFilter registers a filter function that takes no args.
func RegisterFilter(name string, fn FilterFn) {
	RegisterFilterFactory(name, func(args Args) (FilterFn, error) {
		if len(args) != 0 {
			return nil, fmt.Errorf("filter function %q takes no args", name)
		}
		return fn, nil
	})
}

// RegisterMapFactory registers a map function that takes args. Registering a
// name twice panics: it is a programming error, like http.Handle. Its args
// must not name files to open (RegisterFileMapFactory's do).
func RegisterMapFactory(name string, f MapFactory) {
	RegisterFileMapFactory(name, func(_ *objstore.Access, a Args) (MapFn, error) { return f(a) })
}

// RegisterFileMapFactory registers a map function whose args name files,
// which it opens through the policy it is given.
func RegisterFileMapFactory(name string, f FileMapFactory) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.maps[name]; dup {
		panic(fmt.Sprintf("fn: map function %q registered twice", name))
	}
	registry.maps[name] = f
}

// RegisterFilterFactory registers a filter function that takes args.
func RegisterFilterFactory(name string, f FilterFactory) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.filters[name]; dup {
		panic(fmt.Sprintf("fn: filter function %q registered twice", name))
	}
	registry.filters[name] = f
}

// LookupMap returns the factory registered under name; one whose args
// name files opens them as the process may (objstore.Local).
func LookupMap(name string) (MapFactory, bool) {
	f, ok := LookupFileMap(name)
	if !ok {
		return nil, false
	}
	return func(a Args) (MapFn, error) { return f(objstore.Local(), a) }, true
}

// LookupFileMap returns the factory registered under name, taking the
// policy the files its args name are opened through.
func LookupFileMap(name string) (FileMapFactory, bool) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.maps[name]
	return f, ok
}

// LookupFilter returns the factory registered under name.
func LookupFilter(name string) (FilterFactory, bool) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.filters[name]
	return f, ok
}

// MapNames lists the registered map functions, sorted (for error messages).
func MapNames() []string {
	registry.RLock()
	defer registry.RUnlock()
	return sortedKeys(registry.maps)
}

// FilterNames lists the registered filter functions, sorted.
func FilterNames() []string {
	registry.RLock()
	defer registry.RUnlock()
	return sortedKeys(registry.filters)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
