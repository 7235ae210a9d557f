package version

import (
	"regexp"
	"testing"
)

// pep440 is the subset of PEP 440's public versions feedmesh uses
// (release, pre-release, post-release, dev-release): a version matching
// it reads the same after Python's tools normalize it.
var pep440 = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$`)

func TestVersionIsNormalizedPEP440(t *testing.T) {
	if !pep440.MatchString(Version) {
		t.Fatalf("VERSION is %q: write a normalized PEP 440 version (such as 1.2.0, 1.2.0rc1, 1.3.0.dev0), which pip keeps as written", Version)
	}
}
