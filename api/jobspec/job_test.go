package jobspec

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// encodeRaw encodes any value with the wire's plain encoder, as a peer
// that does not go through Job would.
func encodeRaw(t testing.TB, v any) []byte {
	t.Helper()
	b, err := cbor.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestJobDecodeNormalizesAndChecks: a decoded Job is normalized (defaults
// filled, names canonical) and within the rules of a stored job; what is
// not, or carries a consumer's choice or an unknown key, is refused with
// an error naming it.
func TestJobDecodeNormalizesAndChecks(t *testing.T) {
	var j Job
	if err := j.UnmarshalCBOR(encodeRaw(t, map[int]any{2: "DYNAMIC", 3: 0})); err != nil {
		t.Fatal(err)
	}
	want, err := StoredJob(Options{Sharding: Dynamic})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j, want) || j.Epochs() != 1 || j.Delivery() != ExactlyOnce || j.Workers() != AllWorkers || j.Autoscale() || j.ConsumerTTL() != DefaultConsumerTTL {
		t.Fatalf("decoded %+v, want %+v", j.Options(), want.Options())
	}
	// A stored job of an older log may repeat for ever, and share a
	// STATIC job: decoding takes what a stored job may hold.
	if err := j.UnmarshalCBOR(encodeRaw(t, map[int]any{2: "static", 3: -1, 8: true})); err != nil || j.Epochs() != -1 || !j.Share() {
		t.Fatalf("epochs -1, static share: %+v, %v", j.Options(), err)
	}
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"unknown key", map[int]any{2: "off", 3: 1, 99: 1}, "unknown field"},
		{"a name", map[int]any{1: "j", 2: "off", 3: 1}, `name "j"`},
		{"a consumer index", map[int]any{2: "dynamic", 9: true, 4: 2, 10: 1}, "consumer_index 1"},
		{"an offload", map[int]any{2: "dynamic", 40: "local"}, `offload "local"`},
		{"local cpus", map[int]any{2: "dynamic", 41: 2.0}, "local_cpus 2"},
		{"a bad sharding", map[int]any{2: "round-robin"}, `sharding: "round-robin"`},
		{"epochs -2", map[int]any{2: "off", 3: -2}, "epochs: -2"},
		{"a cut without exactly-once", map[int]any{2: "dynamic", 13: AtMostOnce, 42: 2}, "offload_boundary 2: needs delivery exactly-once"},
		{"workers that contradict", map[int]any{2: "dynamic", 15: "3", 5: 2}, "workers 3: contradicts max_workers 2"},
		{"a wrong type", map[int]any{2: 7}, "cannot unmarshal"},
		{"not a map", []int{1, 2}, "cannot unmarshal"},
	} {
		var k Job
		err := k.UnmarshalCBOR(encodeRaw(t, tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "job options: ") {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// Duplicate keys: the first one must not win silently.
	dup := []byte{0xa3, 0x02, 0x63, 'o', 'f', 'f', 0x03, 0x01, 0x03, 0x02}
	if err := j.UnmarshalCBOR(dup); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate key: %v", err)
	}
	if _, err := (Job{}).MarshalCBOR(); err == nil {
		t.Error("the zero Job encodes")
	}
}

// TestJobEncodingKeepsTheWireKeys: a Job encodes under Options' keys, as
// a client of the last release sent them: a normalized request's job
// part, encoded by Options, decodes as the Job.
func TestJobEncodingKeepsTheWireKeys(t *testing.T) {
	n := norm(t, Options{Name: "j", Sharding: Dynamic, Epochs: 2, Compression: "zstd", MaxWorkers: 3, Workers: AutoWorkers, AutoscalePause: -1})
	b, err := n.Job().MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	var keys map[int]cbor.RawMessage
	if err := cbor.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for k, name := range map[int]string{2: "sharding", 3: "epochs", 5: "max_workers", 6: "consumer_ttl", 7: "gc_after", 12: "compression", 13: "delivery", 14: "autoscale", 15: "workers", 18: "autoscale_pause"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("key %d (%s) missing from %x", k, name, b)
		}
	}
	for _, k := range []int{1, 10, 40, 41} {
		if _, ok := keys[k]; ok {
			t.Errorf("the job's encoding carries key %d, a consumer's or the name", k)
		}
	}
	var j Job
	if err := j.UnmarshalCBOR(encodeRaw(t, n.Job().Options())); err != nil || !reflect.DeepEqual(j, n.Job()) {
		t.Fatalf("the request form's job part decodes to %+v, %v", j.Options(), err)
	}
}

// TestWithOffloadBoundary: a job is cut only where a job may be.
func TestWithOffloadBoundary(t *testing.T) {
	exact := norm(t, Options{Name: "j", Sharding: Dynamic}).Job()
	cut, err := exact.WithOffloadBoundary(3)
	if err != nil || cut.OffloadBoundary() != 3 || exact.OffloadBoundary() != 0 {
		t.Fatalf("cut %d, original %d, %v", cut.OffloadBoundary(), exact.OffloadBoundary(), err)
	}
	amo := norm(t, Options{Name: "j", Sharding: Dynamic, Delivery: AtMostOnce}).Job()
	if _, err := amo.WithOffloadBoundary(3); err == nil || !strings.Contains(err.Error(), "needs delivery exactly-once") {
		t.Fatalf("at-most-once cut: %v", err)
	}
}

// TestDiff: the mismatch answer's wording, the job's value first.
func TestDiff(t *testing.T) {
	a := norm(t, Options{Name: "j", Sharding: Dynamic, Compression: "lz4", GCAfter: time.Hour, Workers: AutoWorkers}).Job()
	b := norm(t, Options{Name: "j", Sharding: Static}).Job()
	got := strings.Join(a.Diff(b), "; ")
	want := "sharding=dynamic, not static; gc_after=1h0m0s, not 1m0s; compression=lz4, not none; delivery=exactly-once, not at-most-once; autoscale=true, not false"
	if got != want {
		t.Fatalf("diff:\n got %s\nwant %s", got, want)
	}
	if d := a.Diff(a); d != nil {
		t.Fatalf("a job differs from itself: %v", d)
	}
}

// FuzzJobDecode: decoding arbitrary bytes as a Job never panics; what
// decodes is normalized, encodes canonically and decodes back to itself.
func FuzzJobDecode(f *testing.F) {
	for _, o := range []Options{
		{Name: "j"}, {Name: "j", Sharding: Dynamic, OffloadBoundary: 2}, {Name: "j", Coordinated: true, NumConsumers: 3, PadFinalRound: true},
		{Name: "j", Sharding: Dynamic, Workers: AutoWorkers, MaxWorkers: 4, AutoscaleThreshold: 0.2, AutoscaleRevisit: 3, AutoscalePause: -1},
	} {
		b, err := norm(f, o).Job().MarshalCBOR()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(encodeRaw(f, map[int]any{2: "static", 3: -1, 8: true}))
	f.Add([]byte{0xa1, 0x02, 0x63, 'o', 'f', 'f'})
	f.Fuzz(func(t *testing.T, data []byte) {
		var j Job
		if err := j.UnmarshalCBOR(data); err != nil {
			return
		}
		checkJobRoundTrip(t, j)
		b, _ := j.MarshalCBOR()
		var k Job
		if err := k.UnmarshalCBOR(b); err != nil {
			t.Fatal(err)
		}
		if b2, _ := k.MarshalCBOR(); !bytes.Equal(b, b2) {
			t.Fatalf("encodings differ: %x, %x", b, b2)
		}
	})
}

// FuzzNormalize: options decoded from arbitrary bytes, as a node takes a
// request, never make Normalize panic; what it accepts normalizes to a
// fixed point and its Job round-trips.
func FuzzNormalize(f *testing.F) {
	f.Add(encodeRaw(f, Options{Name: "j", Sharding: Dynamic, Offload: "0.3", LocalCPUs: 1}))
	f.Add(encodeRaw(f, Options{Name: "j", Coordinated: true, NumConsumers: 2, ConsumerIndex: 1}))
	f.Add(encodeRaw(f, Options{Name: "j", Sharding: "Static", Workers: "3", Compression: "LZ4"}))
	f.Add(encodeRaw(f, Options{Name: "j", Sharding: Dynamic, Workers: AutoWorkers, AutoscaleThreshold: 0.5, AutoscalePause: -1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var o Options
		if cbor.Unmarshal(data, &o) != nil {
			return
		}
		n, err := o.Normalize()
		if err != nil {
			return
		}
		again, err := n.Options().Normalize()
		want := n
		want.consumer.workersUnset = false // the request form says the workers
		if err != nil || !reflect.DeepEqual(again, want) {
			t.Fatalf("%+v: normalized twice: %+v, %v; want %+v", o, again, err, want)
		}
		checkJobRoundTrip(t, n.Job())
	})
}
