package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

func mustApply(t *testing.T, s *State, c Command) any {
	t.Helper()
	data, err := EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.ApplyEntry(data)
	if err != nil {
		t.Fatalf("apply %v: %v", c.Type, err)
	}
	return v
}

func TestStatePutDelete(t *testing.T) {
	s := NewState()
	mustApply(t, s, NewPutKV("a", []byte("1")))
	mustApply(t, s, NewPutKV("b", nil))
	mustApply(t, s, NewPutKV("a", []byte("2")))
	if got := s.KV["a"]; string(got) != "2" {
		t.Fatalf("a = %q, want 2", got)
	}
	if got, ok := s.KV["b"]; !ok || got == nil || len(got) != 0 {
		t.Fatalf("b = %#v, %v; want empty non-nil", got, ok)
	}
	if existed := mustApply(t, s, NewDeleteKV("a")); existed != true {
		t.Fatalf("delete a: existed = %v", existed)
	}
	if existed := mustApply(t, s, NewDeleteKV("a")); existed != false {
		t.Fatalf("delete a again: existed = %v", existed)
	}
	if _, ok := s.KV["a"]; ok {
		t.Fatal("a still present")
	}
}

func TestStateRejects(t *testing.T) {
	body, _ := cbor.Marshal(putKVBody{Key: "k", Value: []byte("v")})
	long := string(bytes.Repeat([]byte("k"), maxKeyBytes+1))
	extra, _ := cbor.Marshal(map[int]any{1: "k", 2: []byte("v"), 9: 1})
	cases := []struct {
		name string
		data []byte
		cmd  *Command
		want error
	}{
		{name: "unknown type", cmd: &Command{Version: 1, Type: 999, Body: body}, want: ErrUnknownType},
		{name: "type zero", cmd: &Command{Version: 1, Type: 0, Body: body}, want: ErrUnknownType},
		{name: "newer version", cmd: &Command{Version: 2, Type: TypePutKV, Body: body}, want: ErrUnknownVersion},
		{name: "version zero", cmd: &Command{Version: 0, Type: TypeDeleteKV, Body: body}, want: ErrUnknownVersion},
		{name: "empty key", cmd: ptr(NewPutKV("", []byte("x"))), want: ErrInvalidCommand},
		{name: "long key", cmd: ptr(NewDeleteKV(long)), want: ErrInvalidCommand},
		{name: "body not a map", cmd: &Command{Version: 1, Type: TypePutKV, Body: cbor.RawMessage{0x01}}, want: ErrBadCommand},
		{name: "unknown body field", cmd: &Command{Version: 1, Type: TypePutKV, Body: extra}, want: ErrBadCommand},
		{name: "garbage", data: []byte{0xff, 0x00}, want: ErrBadCommand},
		{name: "empty", data: nil, want: ErrBadCommand},
		{name: "truncated", data: mustEncode(t, NewPutKV("k", []byte("v")))[:5], want: ErrBadCommand},
		{name: "too large", data: make([]byte, MaxCommandBytesLimit+1), want: ErrCommandTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState()
			s.KV["keep"] = []byte("me")
			before := s.Clone()
			data := tc.data
			if tc.cmd != nil {
				data = mustEncode(t, *tc.cmd)
			}
			_, err := s.ApplyEntry(data)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !reflect.DeepEqual(s, before) {
				t.Fatalf("state changed on error: %v", s.KV)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func mustEncode(t testing.TB, c Command) []byte {
	t.Helper()
	b, err := EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomState(r *rand.Rand, n int) *State {
	s := NewState()
	for i := range n {
		v := make([]byte, r.IntN(40))
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		s.KV[fmt.Sprintf("key-%d-%d", i, r.IntN(1000))] = v
	}
	return s
}

func TestSnapshotRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 10, 500} {
		s := randomState(r, n)
		b1, err := s.MarshalSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalSnapshot(b1)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("n=%d: restored state differs", n)
		}
		b2, _ := got.MarshalSnapshot()
		if !bytes.Equal(b1, b2) {
			t.Fatalf("n=%d: snapshot bytes not deterministic", n)
		}
	}
}
