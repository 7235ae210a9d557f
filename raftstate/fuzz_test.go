package raftstate

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzDecodeCommand feeds arbitrary log entries to the decoder and the FSM:
// nothing may panic, an error must leave the state as it was, and a command
// that decodes must survive an encode/decode round trip.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []Command{
		NewPutKV("k", []byte("v")),
		NewDeleteKV("k"),
		{Version: 2, Type: TypePutKV, Body: []byte{0xa0}},
		{Version: 1, Type: 77, At: 12345, Body: []byte{0xf6}},
	} {
		f.Add(mustEncode(f, c))
	}
	f.Add([]byte{})
	f.Add([]byte{0xa1, 0x04, 0x5f})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			return
		}
		again, err := DecodeCommand(mustEncode(t, c))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if again.Version != c.Version || again.Type != c.Type || again.At != c.At || !bytes.Equal(again.Body, c.Body) {
			t.Fatalf("round trip: %+v != %+v", again, c)
		}
		s := NewState()
		s.KV["keep"] = []byte("me")
		before := s.Clone()
		if _, err := s.Apply(c); err != nil && !reflect.DeepEqual(s, before) {
			t.Fatalf("state changed on error %v", err)
		}
	})
}

// FuzzRestoreSnapshot: a snapshot file is input from disk or the network;
// decoding it must never panic, and what decodes must re-encode stably.
func FuzzRestoreSnapshot(f *testing.F) {
	s := NewState()
	s.KV["a"] = []byte("1")
	b, _ := s.MarshalSnapshot()
	f.Add(b)
	f.Add([]byte{0xa1, 0x01, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := UnmarshalSnapshot(data)
		if err != nil {
			return
		}
		b1, err := st.MarshalSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		st2, err := UnmarshalSnapshot(b1)
		if err != nil || !reflect.DeepEqual(st, st2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
