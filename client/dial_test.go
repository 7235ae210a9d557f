package client_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/transport"
)

// Dialing an address where no node answers says which address did not
// answer and what to check, instead of quic-go's bare "timeout: no recent
// network activity".
func TestDialNoNodeSaysWhatToCheck(t *testing.T) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close() // a socket that never answers: a node that is down or paused
	addr := pc.LocalAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fast := transport.FastConfig()
	_, err = client.Dial(ctx, addr, client.Options{Transport: &fast, RequestTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "--port") {
		t.Fatalf("dial %s: %v", addr, err)
	}
}
