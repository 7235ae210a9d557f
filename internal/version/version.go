// Package version holds feedmesh's version, the one source of truth for
// every place that reports it: `feedmesh version` and the version a node
// gossips (mesh.Version), the C library's fm_version, and the Python
// package's metadata and feedmesh.__version__ (python/setup.py reads the
// file VERSION when it builds the package; a checkout on PYTHONPATH reads
// it at import).
//
// The version is PEP 440 (0.1.0.dev0, not semver's 0.1.0-dev) so that
// Python's tools keep it as written: pip normalizes 0.1.0-dev to
// 0.1.0.dev0, and feedmesh.__version__ would then differ from what the Go
// side prints.
package version

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var file string

// Version is the contents of VERSION, without its trailing newline.
var Version = strings.TrimSpace(file)
