package mesh

import (
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api"
)

// The compression option is checked where a node takes a request, and
// "none" is stored as "" (so jobs that say either match).
func TestJobOptionsCompression(t *testing.T) {
	for _, c := range []string{"", "none", "lz4", "zstd", "ZSTD"} {
		if err := (api.JobOptions{Name: "j", Compression: c}).WithDefaults().Validate(); err != nil {
			t.Fatalf("compression %q: %v", c, err)
		}
	}
	err := (api.JobOptions{Name: "j", Compression: "brotli"}).WithDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "brotli") || !strings.Contains(err.Error(), "lz4") {
		t.Fatalf("compression brotli: %v, want an error naming it and the choices", err)
	}
	for in, want := range map[string]string{"": "", "none": "", "LZ4": "lz4", "zstd": "zstd"} {
		o, err := toRaftOptions(api.JobOptions{Sharding: api.Off, Compression: in}.WithDefaults())
		if err != nil || o.Compression != want {
			t.Fatalf("compression %q stored as %q (%v), want %q", in, o.Compression, err, want)
		}
	}
}
