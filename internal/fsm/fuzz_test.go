package fsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
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
		NewRegisterDataset(Dataset{Fingerprint: "fp2", Spec: []byte{1, 2}, NumSplits: 9}),
		LegacyCreateJob("new", "fp1", JobOptions{Sharding: splits.Static, Epochs: 2}, []string{"w1", "w9"}),
		LegacyCreateJob("dyn", "fp1", JobOptions{Sharding: splits.Off}, nil),
		at(NewAttachConsumer("dyn", "c2"), 30),
		NewDetachConsumer("off", "c-off"),
		NewExpireConsumers(1 << 62),
		NewAssignTask("dyn", "w3"),
		NewLeaseSplits("dyn", "w1", 3, 16),
		NewLeaseSplits("dyn", "w1", 2, 16),
		NewLeaseSplitsPreferring("dyn", 0, "w1", 0, 4, 3, ranges.Set{2, 5, 30, 32}),
		NewFinishSplits("dyn", "w1", 1, []int64{5, 6}),
		NewFinishSplits("dyn", "w1", 0, []int64{0, 0}),
		NewExpireWorker("w1"),
		at(NewGarbageCollectJob("off"), 1<<62),
		LegacyCreateJob("coord", "fp1", JobOptions{Sharding: splits.Dynamic, NumConsumers: 4, Coordinated: true, PadFinalRound: true}, nil),
		LegacyCreateJob("zjob", "fp1", JobOptions{Sharding: splits.Dynamic, Compression: "lz4"}, nil),
		NewReportRound("coord", 3, 70),
		NewReportRound("coord", 9, -1),
		// CreateJob v6: the options in jobspec's encoding.
		v6Job(f, "new6", JobOptions{Sharding: splits.Static, Epochs: 2}, []string{"w1", "w9"}),
		v6Job(f, "dyn", JobOptions{Sharding: splits.Dynamic, Epochs: 3}, nil),
		v6Job(f, "loss6", JobOptions{Sharding: splits.Dynamic, CountLoss: true}, nil),
		v6Job(f, "cut6", JobOptions{Sharding: splits.Dynamic, Delivery: DeliveryExactlyOnce, OffloadBoundary: 1}, nil),
		// Quota: a tenant's command in its limits.
		NewQuota(Limits{MaxJobs: 9, MaxDatasets: 9, MaxConsumers: 1, MaxSpecBytes: 64}, at(NewAttachConsumer("dyn", "c9"), 40)),
		NewQuota(Limits{}, NewRegisterOwnedDataset(Dataset{Fingerprint: "fp9", Spec: []byte{1}, NumSplits: 2}, Owner{Principal: "p", Tenant: "t"})),
		NewQuota(Limits{MaxJobs: 1}, NewPutKV("k", nil)),
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
		s := busyState(t)
		before := s.Clone()
		if _, err := s.Apply(c); err != nil && !reflect.DeepEqual(s, before) {
			t.Fatalf("state changed on error %v", err)
		}
		// Whatever a command did, the state still snapshots and restores.
		b, err := s.MarshalSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnmarshalSnapshot(b); err != nil {
			t.Fatalf("state after %v does not restore: %v", c.Type, err)
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
	busy := busyState(f)
	jobs, err := busy.MarshalSnapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(jobs)
	f.Add(format2(f, busy, nil)) // the jobs' options in the legacy form
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
