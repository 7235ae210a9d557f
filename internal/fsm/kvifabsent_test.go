package fsm

import "testing"

func TestPutKVIfAbsentFirstWins(t *testing.T) {
	s := NewState()
	v, err := s.Apply(NewPutKVIfAbsent("autocache/ab", []byte("cache")))
	if err != nil || string(v.([]byte)) != "cache" {
		t.Fatalf("first: %v, %v", v, err)
	}
	v, err = s.Apply(NewPutKVIfAbsent("autocache/ab", []byte("compute")))
	if err != nil || string(v.([]byte)) != "cache" {
		t.Fatalf("second: %v, %v; want the first value back", v, err)
	}
	if string(s.KV["autocache/ab"]) != "cache" {
		t.Fatalf("state %q", s.KV["autocache/ab"])
	}
	b, _ := s.MarshalSnapshot()
	r, err := UnmarshalSnapshot(b)
	if err != nil || string(r.KV["autocache/ab"]) != "cache" {
		t.Fatalf("snapshot: %v, %q", err, r.KV["autocache/ab"])
	}
	if _, err := s.Apply(NewPutKVIfAbsent("", nil)); err == nil {
		t.Fatal("empty key accepted")
	}
}
