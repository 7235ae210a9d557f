package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/internal/splits"
)

// TestDowngradeCreateJob: a CreateJob v6 downgraded for a cluster of an
// older release (ProtocolLegacy) creates the same job as the v6 command,
// on every replica alike; a state written as snapshot format 2 (what an
// older node restores) restores to the same state.
func TestDowngradeCreateJob(t *testing.T) {
	r := rand.New(rand.NewPCG(36, 5))
	pick := func(vs ...any) any { return vs[r.IntN(len(vs))] }
	downgraded := 0
	for i := range 3000 {
		o := JobOptions{
			Sharding:     pick(splits.Off, splits.Dynamic, splits.Dynamic, splits.Static).(splits.Policy),
			Epochs:       pick(int64(0), int64(1), int64(3), int64(-1)).(int64),
			NumConsumers: pick(0, 0, 2).(int),
			MaxWorkers:   pick(0, 0, 3).(int),
			ConsumerTTL:  pick(time.Duration(0), time.Second).(time.Duration),
			GCAfter:      pick(time.Duration(0), time.Minute).(time.Duration),
			Share:        r.IntN(5) == 0, Coordinated: r.IntN(5) == 0, PadFinalRound: r.IntN(8) == 0,
			Compression: pick("", "lz4", "zstd").(string),
			Delivery:    pick("", DeliveryExactlyOnce, DeliveryAtMostOnce).(string),
			Autoscale:   r.IntN(3) == 0,
			CountLoss:   r.IntN(5) == 0,
		}
		if r.IntN(4) == 0 {
			o.OffloadBoundary = pick(1, 3).(int)
		}
		legacy := at(LegacyCreateJob("j", "fp1", o, nil), 5000)
		if r.IntN(3) == 0 {
			legacy = at(LegacyResumeJob("j", "fp1", o, ResumeBody{From: 2, Part: "c1", Want: 1}), 5000)
		}
		up, ok := UpgradeCreateJob(legacy)
		if !ok {
			continue // invalid options: no v6 form
		}
		down, ok := DowngradeCreateJob(up)
		if !ok {
			t.Fatalf("case %d %+v: the v6 command has no legacy form", i, o)
		}
		if down.Version >= createJobV6 || down.At != up.At {
			t.Fatalf("case %d: downgraded to v%d at %d", i, down.Version, down.At)
		}
		downgraded++
		a, b := busyState(t), busyState(t)
		va, ea := a.ApplyIndex(9000, up)
		vb, eb := b.ApplyIndex(9000, down)
		if fmt.Sprint(va, ea) != fmt.Sprint(vb, eb) {
			t.Fatalf("case %d %+v: v6 %v %v, downgraded %v %v", i, o, va, ea, vb, eb)
		}
		sa, _ := a.MarshalSnapshot()
		sb, _ := b.MarshalSnapshot()
		if !bytes.Equal(sa, sb) {
			t.Fatalf("case %d %+v: the states differ", i, o)
		}
		old, err := a.MarshalSnapshotAt(ProtocolLegacy)
		if err != nil {
			t.Fatalf("case %d: format 2: %v", i, err)
		}
		back, err := UnmarshalSnapshot(old)
		if err != nil {
			t.Fatalf("case %d: a format 2 snapshot does not restore: %v", i, err)
		}
		if sc, _ := back.MarshalSnapshot(); !bytes.Equal(sa, sc) {
			t.Fatalf("case %d %+v: the state restored from format 2 differs", i, o)
		}
	}
	if downgraded < 300 {
		t.Fatalf("only %d cases downgraded", downgraded)
	}
}

// TestProtocolLocalCensusMatchesAPI: the level clients check before an
// at-most-once job with an offload fraction (api.ProtocolLocalCensus) is
// the state machine's.
func TestProtocolLocalCensusMatchesAPI(t *testing.T) {
	if api.ProtocolLocalCensus != ProtocolLocalCensus || Protocol < ProtocolLocalCensus {
		t.Fatalf("api %d, fsm %d, this release %d", api.ProtocolLocalCensus, ProtocolLocalCensus, Protocol)
	}
}
