package splits

import "slices"

// StaticAssignment returns the splits that worker reads under STATIC
// sharding: split i goes to workers[i mod n], where workers is sorted and
// deduplicated first (a copy; the argument is not modified), so every node
// computes the same assignment from the same membership whatever order it
// listed it in. A worker not in the list, an empty list or numSplits <= 0
// gets nil. The result is ascending.
func StaticAssignment(numSplits int64, workers []string, worker string) []int64 {
	ws := slices.Clone(workers)
	slices.Sort(ws)
	ws = slices.Compact(ws)
	idx, ok := slices.BinarySearch(ws, worker)
	if !ok || numSplits <= 0 {
		return nil
	}
	n := int64(len(ws))
	if int64(idx) >= numSplits {
		return nil
	}
	out := make([]int64, 0, (numSplits-int64(idx)+n-1)/n)
	for i := int64(idx); i < numSplits; i += n {
		out = append(out, i)
	}
	return out
}
