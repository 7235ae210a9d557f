package transport

import (
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/quic-go/quic-go"
)

// Data streams to one peer take DataConns connections in turn; Raft and
// control streams keep their own single connection.
func TestDataConnsSpreadsDataStreams(t *testing.T) {
	cfg := FastConfig()
	cfg.DataConns = 3
	srv := startNode(t, nodeOpts{})
	cli := startNode(t, nodeOpts{cfg: &cfg, noServer: true, noRPC: true})
	ctx := testutil.Ctx(t, 5*time.Second)
	conns := map[*quic.Conn]int{}
	var streams []*Stream
	for i := 0; i < 9; i++ {
		s, err := cli.t.Dial(ctx, srv.addr(), KindData)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
		conns[s.conn]++
	}
	ctl, err := cli.t.Dial(ctx, srv.addr(), KindControl)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	for _, s := range streams {
		s.Close()
	}
	if len(conns) != 3 {
		t.Fatalf("9 data streams used %d connections, want 3", len(conns))
	}
	for c, k := range conns {
		if k != 3 {
			t.Errorf("a connection carries %d of 9 data streams, want 3", k)
		}
		if c == ctl.conn {
			t.Error("a data stream shares the control connection")
		}
	}
	bad := FastConfig()
	bad.DataConns = 0
	if err := bad.Validate(); err == nil {
		t.Error("DataConns 0 validated")
	}
}
