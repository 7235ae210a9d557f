// Package pairwise builds covering arrays of strength 2: a few rows of a
// product of dimensions such that every pair of values of every two
// dimensions that some allowed row has appears in one of them. It is
// pure and deterministic (the same input gives the same rows), for tests
// that cannot afford the full product (systemtest/compose).
package pairwise

import "fmt"

// MaxProduct bounds the product Generate enumerates.
const MaxProduct = 1 << 22

// Generate returns rows of the product of dimensions of sizes[i] values
// (row[i] in [0, sizes[i])) that valid allows (nil: every row), such that
// every pair of values (row[i], row[j]), i < j, that some allowed row
// has appears in a returned row. Greedy (after AETG): each next row is
// the allowed row covering the most pairs not yet covered, the first in
// the product's order on a tie. A product above MaxProduct, or a size
// below 1, is an error.
func Generate(sizes []int, valid func(row []int) bool) ([][]int, error) {
	total := 1
	for i, s := range sizes {
		if s < 1 {
			return nil, fmt.Errorf("pairwise: dimension %d has %d values", i, s)
		}
		if total > MaxProduct/s {
			return nil, fmt.Errorf("pairwise: the product of %v is above %d rows", sizes, MaxProduct)
		}
		total *= s
	}
	p := newPairs(sizes)
	var rows [][]int
	need := make([]bool, p.n)
	forEach(sizes, func(row []int) {
		if valid == nil || valid(row) {
			rows = append(rows, append([]int(nil), row...))
			p.each(row, func(k int) { need[k] = true })
		}
	})
	left := 0
	for _, b := range need {
		if b {
			left++
		}
	}
	var out [][]int
	for left > 0 {
		best, bestGain := -1, 0
		for r, row := range rows {
			gain := 0
			p.each(row, func(k int) {
				if need[k] {
					gain++
				}
			})
			if gain > bestGain {
				best, bestGain = r, gain
			}
		}
		p.each(rows[best], func(k int) {
			if need[k] {
				need[k] = false
				left--
			}
		})
		out = append(out, rows[best])
	}
	return out, nil
}

// Uncovered returns the pairs ("i=a j=b") that some allowed row of the
// product has and no row of rows: empty for Generate's rows. Tests use it.
func Uncovered(sizes []int, valid func(row []int) bool, rows [][]int) []string {
	p := newPairs(sizes)
	covered := make([]bool, p.n)
	for _, row := range rows {
		p.each(row, func(k int) { covered[k] = true })
	}
	var out []string
	seen := make([]bool, p.n)
	forEach(sizes, func(row []int) {
		if valid != nil && !valid(row) {
			return
		}
		for i := range row {
			for j := i + 1; j < len(row); j++ {
				k := p.index(i, j, row[i], row[j])
				if !covered[k] && !seen[k] {
					seen[k] = true
					out = append(out, fmt.Sprintf("%d=%d %d=%d", i, row[i], j, row[j]))
				}
			}
		}
	})
	return out
}

// pairs numbers the pairs of values of two dimensions.
type pairs struct {
	sizes []int
	off   [][]int // off[i][j]: the first pair of dimensions i < j
	n     int
}

func newPairs(sizes []int) pairs {
	p := pairs{sizes: sizes, off: make([][]int, len(sizes))}
	for i := range sizes {
		p.off[i] = make([]int, len(sizes))
		for j := i + 1; j < len(sizes); j++ {
			p.off[i][j] = p.n
			p.n += sizes[i] * sizes[j]
		}
	}
	return p
}

func (p pairs) index(i, j, a, b int) int { return p.off[i][j] + a*p.sizes[j] + b }

// each calls f with the number of every pair row has.
func (p pairs) each(row []int, f func(int)) {
	for i := range row {
		for j := i + 1; j < len(row); j++ {
			f(p.index(i, j, row[i], row[j]))
		}
	}
}

// forEach calls f with every row of the product, in order (the last
// dimension fastest); f must not keep row.
func forEach(sizes []int, f func(row []int)) {
	row := make([]int, len(sizes))
	for {
		f(row)
		i := len(row) - 1
		for ; i >= 0; i-- {
			row[i]++
			if row[i] < sizes[i] {
				break
			}
			row[i] = 0
		}
		if i < 0 {
			return
		}
	}
}
