package mesh

import (
	"strings"
	"testing"

	"github.com/feedmesh/feedmesh/api"
)

// The compression option is checked where a node takes a request (a
// name this node's workers do not have is refused), and "none" is stored
// as "" (so jobs that say either match).
func TestJobOptionsCompression(t *testing.T) {
	for in, want := range map[string]string{"": "", "none": "", "LZ4": "lz4", "zstd": "zstd", "ZSTD": "zstd"} {
		n, err := normalizeRequest(api.JobOptions{Name: "j", Compression: in})
		if err != nil || n.Job().Compression() != want {
			t.Fatalf("compression %q stored as %q (%v), want %q", in, n.Job().Compression(), err, want)
		}
	}
	_, err := normalizeRequest(api.JobOptions{Name: "j", Compression: "brotli"})
	if err == nil || !strings.Contains(err.Error(), "brotli") || !strings.Contains(err.Error(), "lz4") {
		t.Fatalf("compression brotli: %v, want an error naming it and the choices", err)
	}
}
