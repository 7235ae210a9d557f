package mesh_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/testcluster"
	"github.com/feedmesh/feedmesh/transport"
)

// TestNodeRefusesUnfoldedTakeExactlyOnce: a client applies an exactly-once
// DYNAMIC job's take and skip to its source before it sends the spec
// (pipeline.FoldTakeSkip). A request that still has them (a client of an
// older release, or one that skips the check) is refused with an error
// that says so, not run with a take per worker (which left leased splits
// unread: the job never ended). The folded spec is accepted.
func TestNodeRefusesUnfoldedTakeExactlyOnce(t *testing.T) {
	c := testcluster.Start(t, 1)
	addr := c.Node(0).Addr()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	tr, err := transport.New(pc, nil, mustClientTLS(t), transport.FastConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	codec, err := transport.NewCodec(64<<10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	spec := pipeline.NewSpec(pipeline.Source{Range: &pipeline.RangeSource{Start: 0, Stop: 100, SplitSize: 10}}).Skip(5).Take(20).Batch(5, false)
	n, err := jobspec.Options{Name: "unfolded", Sharding: jobspec.Dynamic, Offload: jobspec.OffloadRemote}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	distribute := func(s *pipeline.Spec) error {
		canon, err := s.CanonicalEncoding()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var info api.JobInfo
		return transport.Call(ctx, tr, codec, addr, api.MethodDistribute, api.DistributeRequest{Spec: canon, Options: n.Options(), Consumer: "c0"}, &info)
	}
	err = distribute(spec)
	if !errors.Is(err, transport.ErrInvalid) || !strings.Contains(err.Error(), "take and skip are applied to its source by the client") {
		t.Fatalf("an exactly-once DYNAMIC spec with its take and skip: %v", err)
	}
	folded, ok, err := spec.FoldTakeSkip()
	if err != nil || !ok {
		t.Fatalf("fold: %v %v", ok, err)
	}
	if err := distribute(folded); err != nil {
		t.Fatalf("the folded spec: %v", err)
	}
}
