package mesh

import "testing"

// TestLevelMemoryKeepsAServerGossipForgot: a server of the configuration
// that gossip stops listing (dead past the member table's retention)
// keeps the level it last advertised, so the cluster's level does not
// fall to the legacy one; a server that leaves the configuration is
// forgotten (the memory is bounded by the configuration).
func TestLevelMemoryKeepsAServerGossipForgot(t *testing.T) {
	var l levelMemory
	l.update([]string{"a", "b", "c"}, map[string]int{"a": 4, "b": 4, "c": 3})
	l.update([]string{"a", "b", "c"}, map[string]int{"a": 4, "b": 4}) // c gone from gossip
	if v, ok := l.get("c"); !ok || v != 3 {
		t.Fatalf("c's level after gossip forgot it: %d %v, want 3 (its last advertised)", v, ok)
	}
	l.update([]string{"a", "b", "c"}, map[string]int{"a": 4, "b": 4, "c": 4}) // c upgraded and back
	if v, _ := l.get("c"); v != 4 {
		t.Fatalf("c's level after it advertised 4: %d", v)
	}
	l.update([]string{"a", "b"}, map[string]int{"a": 4, "b": 4}) // c removed from the configuration
	if _, ok := l.get("c"); ok || len(l.m) != 2 {
		t.Fatalf("c still remembered after it left the configuration: %v", l.m)
	}
	if _, ok := l.get("d"); ok {
		t.Fatal("a server never seen has a level")
	}
}
