package order

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// A Mixture interleaves K sources into one stream. The stream is cut into
// windows of Window positions; a stage gives, for every window from its
// first on, how many positions of the window each source takes (Counts,
// summing to Window). So proportions are exact in every window, not just
// on average, and a step schedule (a curriculum) is a list of stages.
//
// The zero Mixture is not usable; build one with NewMixture.
//
// Within a window the sources are interleaved smoothly, not in runs: a
// balanced binary tree over the sources splits each window between its
// two halves Bresenham-style, with a phase drawn from (seed, window,
// node), so the k-th position of a source in a window is computed in
// O(log K) without materializing the window, and windows differ.
//
// At(j) says which source position j takes and which of that source's
// own positions (u: its 0th, 1st… over the whole stream): the source's
// positions are consumed in order, each once. The caller maps u to the
// source's pass (epoch) u / n and its position u mod n in that pass's
// Layout.
type Mixture struct {
	window uint64
	key    uint64 // Key(seed, labelMix)
	stages []Stage
	cum    [][]uint64 // cum[s][k]: sum of stages[s].Counts[:k]
}

// Stage is one part of a mixture's schedule: from window From on, each
// window gives Counts[k] positions to source k.
type Stage struct {
	From   uint64
	Counts []uint64
}

// Mixture bounds.
const (
	// MaxSources bounds the sources of a mixture.
	MaxSources = 1 << 10
	// MaxStages bounds a schedule's stages.
	MaxStages = 1 << 10
	// MaxMixWindow bounds a mixture window (so window² fits 64 bits).
	MaxMixWindow = 1 << 24
)

// ErrMixture: a mixture that cannot be.
var ErrMixture = errors.New("order: bad mixture")

// NewMixture checks and returns a mixture.
func NewMixture(window, seed uint64, stages []Stage) (Mixture, error) {
	if window == 0 || window > MaxMixWindow {
		return Mixture{}, fmt.Errorf("%w: window of %d (want 1 to %d)", ErrMixture, window, MaxMixWindow)
	}
	if len(stages) == 0 || len(stages) > MaxStages {
		return Mixture{}, fmt.Errorf("%w: %d stages (want 1 to %d)", ErrMixture, len(stages), MaxStages)
	}
	k := len(stages[0].Counts)
	if k == 0 || k > MaxSources {
		return Mixture{}, fmt.Errorf("%w: %d sources (want 1 to %d)", ErrMixture, k, MaxSources)
	}
	m := Mixture{window: window, key: Key(seed, labelMix), stages: make([]Stage, len(stages)), cum: make([][]uint64, len(stages))}
	for s, st := range stages {
		switch {
		case s == 0 && st.From != 0:
			return Mixture{}, fmt.Errorf("%w: the first stage starts at window %d, not 0", ErrMixture, st.From)
		case s > 0 && st.From <= stages[s-1].From:
			return Mixture{}, fmt.Errorf("%w: stage %d starts at window %d, not after %d", ErrMixture, s, st.From, stages[s-1].From)
		case len(st.Counts) != k:
			return Mixture{}, fmt.Errorf("%w: stage %d has %d sources, stage 0 %d", ErrMixture, s, len(st.Counts), k)
		}
		cum := make([]uint64, k+1)
		for i, c := range st.Counts {
			if c > window {
				return Mixture{}, fmt.Errorf("%w: stage %d gives source %d %d of a window of %d", ErrMixture, s, i, c, window)
			}
			cum[i+1] = cum[i] + c
		}
		if cum[k] != window {
			return Mixture{}, fmt.Errorf("%w: stage %d's counts sum to %d, not the window %d", ErrMixture, s, cum[k], window)
		}
		m.stages[s] = Stage{From: st.From, Counts: slices.Clone(st.Counts)}
		m.cum[s] = cum
	}
	return m, nil
}

// Window is the mixture's window.
func (m Mixture) Window() uint64 { return m.window }

// Sources is K.
func (m Mixture) Sources() int { return len(m.stages[0].Counts) }

func (m Mixture) stageOf(w uint64) int {
	return sort.Search(len(m.stages), func(s int) bool { return m.stages[s].From > w }) - 1
}

// At returns the source of position j and the source's own position.
func (m Mixture) At(j uint64) (source int, u uint64) {
	w, o := j/m.window, j%m.window
	s := m.stageOf(w)
	cum := m.cum[s]
	lo, hi := 0, len(cum)-1
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		t := cum[hi] - cum[lo]
		a := cum[mid] - cum[lo]
		switch {
		case a == 0:
			lo = mid
		case a == t:
			hi = mid
		default:
			// The phase of this node of the tree in window w.
			phi := mix64(m.key^mix64(w*0x9e3779b97f4a7c15+uint64(lo)<<20+uint64(hi))) % t
			l0 := (o*a + phi) / t
			l1 := ((o+1)*a + phi) / t
			if l1 > l0 {
				hi, o = mid, l0
			} else {
				lo, o = mid, o-l0
			}
		}
	}
	return lo, m.prior(lo, w) + o
}

// prior is how many positions source k took in windows before w.
func (m Mixture) prior(k int, w uint64) uint64 {
	var n uint64
	for s, st := range m.stages {
		if st.From >= w {
			break
		}
		end := w
		if s+1 < len(m.stages) {
			end = min(end, m.stages[s+1].From)
		}
		n += (end - st.From) * st.Counts[k]
	}
	return n
}

// Taken is how many positions source k takes among [0, j): the source's
// progress at position j.
func (m Mixture) Taken(k int, j uint64) uint64 {
	if k < 0 || k >= m.Sources() {
		return 0
	}
	w, o := j/m.window, j%m.window
	n := m.prior(k, w)
	for x := range o { // O(window): for checkpoints and tests, not the data path
		if s, _ := m.At(w*m.window + x); s == k {
			n++
		}
	}
	return n
}

// Apportion turns weights into counts of a window: exact integers summing
// to window, each within 1 of window·w/Σw (largest remainder; ties to the
// lower source). It is computed once, when a job is created, and the
// counts are what the cluster stores: no node repeats float arithmetic.
func Apportion(window uint64, weights []float64) ([]uint64, error) {
	if window == 0 || window > MaxMixWindow || len(weights) == 0 || len(weights) > MaxSources {
		return nil, fmt.Errorf("%w: apportion a window of %d among %d weights", ErrMixture, window, len(weights))
	}
	var sum float64
	for i, w := range weights {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return nil, fmt.Errorf("%w: weight %d is %v", ErrMixture, i, w)
		}
		sum = float64(sum + w)
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return nil, fmt.Errorf("%w: weights sum to %v", ErrMixture, sum)
	}
	counts := make([]uint64, len(weights))
	frac := make([]float64, len(weights))
	var given uint64
	for i, w := range weights {
		q := float64(float64(w/sum) * float64(window))
		f := math.Floor(q)
		counts[i] = min(uint64(f), window)
		frac[i] = float64(q - f)
		given += counts[i]
	}
	idx := make([]int, len(weights))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return frac[idx[a]] > frac[idx[b]] })
	// Rounding can push a quota just past an integer: take the excess back
	// from the smallest remainders (those just past one).
	for i := len(idx) - 1; given > window; i-- {
		if k := idx[(i%len(idx)+len(idx))%len(idx)]; counts[k] > 0 {
			counts[k]--
			given--
		}
	}
	for i := 0; given < window; i++ {
		k := idx[i%len(idx)]
		if weights[k] == 0 {
			continue
		}
		counts[k]++
		given++
	}
	return counts, nil
}
