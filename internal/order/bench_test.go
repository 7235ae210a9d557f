package order

import (
	"math/rand/v2"
	"testing"
)

// Benchmarks of the cost per element of deterministic order. Each op is
// one element; the baselines, in the same run, are one PCG draw (what a
// buffer shuffle spends per element) and a materialized Fisher–Yates
// permutation of 2^20 elements (per element), so read the figures as
// ratios to them.

var sink uint64

func BenchmarkBaselinePCG(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		sink += r.Uint64N(1 << 30)
	}
}

func BenchmarkBaselineFisherYatesPerElement(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += n { // b.N elements, n at a time
		r.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	}
	sink += uint64(p[0])
}

func BenchmarkPermAt(b *testing.B) {
	for _, n := range []uint64{1 << 20, 1e9, 1<<40 + 7} {
		p, _ := NewPerm(n, 99)
		b.Run(sizeName(n), func(b *testing.B) {
			var i uint64
			for b.Loop() {
				sink += p.At(i)
				i++
			}
		})
	}
}

func BenchmarkLayoutAt(b *testing.B) {
	l, err := NewLayout(1e9, 4096, 64, 7, 3)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("random", func(b *testing.B) { // the client locating an element
		var p uint64
		for b.Loop() {
			id, _ := l.At(p % 1e9)
			sink += id
			p += 0x9e3779b97f4a7c15 >> 20
		}
	})
	b.Run("window", func(b *testing.B) { // a worker listing its window
		n := l.WindowLen(0)
		for i := 0; i < b.N; i += int(n) {
			ids, _ := l.Window(uint64(i) / n % l.Windows())
			sink += ids[0]
		}
	})
}

func BenchmarkMixtureAt(b *testing.B) {
	for _, k := range []int{3, 16} {
		counts := make([]uint64, k)
		counts[0] = 4096 - uint64(k-1)*100
		for i := 1; i < k; i++ {
			counts[i] = 100
		}
		m, err := NewMixture(4096, 5, []Stage{{Counts: counts}, {From: 1000, Counts: counts}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(sizeName(uint64(k)), func(b *testing.B) {
			var j uint64
			for b.Loop() {
				_, u := m.At(j)
				sink += u
				j++
			}
		})
	}
}

func BenchmarkDigestAdd(b *testing.B) {
	var d Digest
	key := DigestKey(1, 2)
	var i uint64
	for b.Loop() {
		d.Add(key, 0, i)
		i++
	}
	sink += d.Sum[0]
}

func BenchmarkCutNth(b *testing.B) {
	var rs []Range
	for i := range uint64(MaxSkips + MaxAhead) {
		rs = append(rs, Range{i * 1000, i*1000 + 10})
	}
	c := Cut{Start: 5, Gaps: NewGaps(rs...), N: 64}
	var k uint64
	for b.Loop() {
		p, _ := c.Nth(k%64, k/64)
		sink += p
		k++
	}
}

func sizeName(n uint64) string {
	switch {
	case n >= 1<<40:
		return "n=2^40"
	case n >= 1e9:
		return "n=1e9"
	case n >= 1<<20:
		return "n=2^20"
	}
	return "k=" + string(rune('0'+n/10)) + string(rune('0'+n%10))
}
