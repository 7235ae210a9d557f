package client

import (
	"slices"
	"testing"

	"github.com/feedmesh/feedmesh/api"
)

// TestLearnNodes: a client that knew one node at Dial learns the job's live
// workers as nodes to fail over to, without duplicates or expired ones, and
// within maxNodes.
func TestLearnNodes(t *testing.T) {
	c := &Client{nodes: []string{"a:1"}}
	c.learnNodes([]api.WorkerInfo{{Name: "a", Addr: "a:1"}, {Name: "b", Addr: "b:1"}, {Name: "c", Addr: "c:1", Expired: true}, {Name: "d"}})
	if want := []string{"a:1", "b:1"}; !slices.Equal(c.nodes, want) {
		t.Fatalf("nodes %v, want %v", c.nodes, want)
	}
	var many []api.WorkerInfo
	for i := range 2 * maxNodes {
		many = append(many, api.WorkerInfo{Addr: string(rune('A'+i%26)) + ":" + string(rune('0'+i/26))})
	}
	c.learnNodes(many)
	if len(c.nodes) != maxNodes {
		t.Fatalf("%d nodes, want the bound %d", len(c.nodes), maxNodes)
	}
}
