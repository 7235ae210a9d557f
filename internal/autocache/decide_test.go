package autocache

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	const mb = 1e6
	cases := []struct {
		name      string
		p         Profile
		cache     bool
		compute   time.Duration
		read      time.Duration
		wantError bool
	}{
		// 2 ms of CPU per 100-byte element against 100 MB/s: reading
		// wins by orders of magnitude.
		{"expensive prefix, small elements", Profile{Elements: 500, ComputeNanos: 500 * 2e6, Bytes: 500 * 100, ReadBytesPerSec: 100 * mb}, true, 2 * time.Second, time.Millisecond, false},
		// 20 µs per 1 MB element against a 10 MB/s disk: compute.
		{"cheap prefix, large elements, slow disk", Profile{Elements: 100, ComputeNanos: 100 * 20e3, Bytes: 100 * mb, ReadBytesPerSec: 10 * mb}, false, 20 * time.Millisecond, 100 * time.Second, false},
		// Equal times: compute (a put costs disk and a write).
		{"tie computes", Profile{Elements: 1, ComputeNanos: 1e6, Bytes: 1000, ReadBytesPerSec: 1e6}, false, time.Second, time.Second, false},
		{"just faster to read", Profile{Elements: 1, ComputeNanos: 1e6 + 1000, Bytes: 1000, ReadBytesPerSec: 1e6}, true, time.Second + time.Millisecond, time.Second, false},
		{"empty elements always read faster", Profile{Elements: 10, ComputeNanos: 10, Bytes: 0, ReadBytesPerSec: 1}, true, time.Microsecond, 0, false},
		{"no elements", Profile{ReadBytesPerSec: 1}, false, 0, 0, true},
		{"no throughput", Profile{Elements: 1, ComputeNanos: 1}, false, 0, 0, true},
		{"negative time", Profile{Elements: 1, ComputeNanos: -1, ReadBytesPerSec: 1}, false, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Decide(c.p, DecideN)
			if c.wantError {
				if err == nil {
					t.Fatalf("Decide(%+v) = %+v, want an error", c.p, d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Cache != c.cache || d.Compute != c.compute || d.Read != c.read {
				t.Fatalf("Decide(%+v) = cache %v compute %v read %v, want %v %v %v", c.p, d.Cache, d.Compute, d.Read, c.cache, c.compute, c.read)
			}
		})
	}
}

// Property: decisions are monotone. Slower compute never turns cache into
// compute; a faster disk never turns cache into compute.
func TestDecideMonotone(t *testing.T) {
	for e := int64(1); e < 2000; e = e*3 + 1 {
		for c := int64(1); c < 1e10; c *= 7 {
			for b := int64(0); b < 1e9; b = b*5 + 3 {
				for _, r := range []float64{1e3, 1e6, 1e9} {
					p := Profile{Elements: e, ComputeNanos: c, Bytes: b, ReadBytesPerSec: r}
					d, err := Decide(p, DecideN)
					if err != nil {
						t.Fatal(err)
					}
					slower, faster := p, p
					slower.ComputeNanos *= 2
					faster.ReadBytesPerSec *= 2
					ds, _ := Decide(slower, DecideN)
					df, _ := Decide(faster, DecideN)
					if d.Cache && (!ds.Cache || !df.Cache) {
						t.Fatalf("%+v caches, but slower compute %v / faster disk %v", p, ds.Cache, df.Cache)
					}
				}
			}
		}
	}
}
