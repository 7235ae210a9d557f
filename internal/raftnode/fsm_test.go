package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/fxamacker/cbor/v2"
)

func TestFSMSnapshotRestore(t *testing.T) {
	f := newMachine()
	f.state = randomState(rand.New(rand.NewPCG(3, 4)), 50)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !sink.closed {
		t.Fatal("Persist did not close the sink")
	}
	g := newMachine()
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.state, f.state) {
		t.Fatal("restored FSM differs")
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	// Written as the state machine writes snapshots (deterministic CBOR);
	// format 1 is {1: format, 2: the KV table}.
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	newer, _ := enc.Marshal(map[int]any{1: 99, 2: map[string][]byte{"a": {1}}, 3: "future"})
	noFormat, _ := enc.Marshal(map[int]any{2: map[string][]byte{"a": {1}}})
	emptyKey, _ := enc.Marshal(map[int]any{1: 1, 2: map[string][]byte{"": {1}}})
	extra, _ := enc.Marshal(map[int]any{1: 1, 2: map[string][]byte{}, 7: 1})
	cases := map[string][]byte{
		"newer format":  newer,
		"no format":     noFormat,
		"empty key":     emptyKey,
		"unknown field": extra,
		"garbage":       []byte("not cbor at all"),
		"empty":         {},
		"array":         {0x82, 0x01, 0x02},
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			f := newMachine()
			f.state.KV["keep"] = []byte("me")
			err := f.Restore(io.NopCloser(bytes.NewReader(data)))
			if !errors.Is(err, fsm.ErrSnapshotFormat) {
				t.Fatalf("err = %v, want ErrSnapshotFormat", err)
			}
			if v, ok := f.get("keep"); !ok || string(v) != "me" {
				t.Fatal("failed restore changed the state")
			}
		})
	}
}

// randomState is a state with n random keys.
func randomState(r *rand.Rand, n int) *fsm.State {
	s := fsm.NewState()
	for i := range n {
		v := make([]byte, r.IntN(40))
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		s.KV[fmt.Sprintf("key-%d-%d", i, r.IntN(1000))] = v
	}
	return s
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (m *memSink) ID() string { return "mem" }

func (m *memSink) Close() error { m.closed = true; return nil }

func (m *memSink) Cancel() error { m.canceled = true; return nil }
