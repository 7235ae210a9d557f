package splits

// PreferHeld is the lease hint of the autocache (README, Autocache): how
// many splits to hand a worker that asked for n, given the next split id
// of the epoch (the leases' cursor: DYNAMIC hands out consecutive ids) and
// the splits the worker holds in its cache. A lease then stops where the
// worker's holdings start or end, so that a worker that holds the splits
// at the cursor takes their whole run (reading them from its own disk),
// and one that holds splits just ahead takes only those before them (and
// may get its own run with its next lease), instead of reading another
// node's over the network. Without holdings it is n. The result is in
// [1, limit] (limit >= 1). It is only a size: which splits a lease holds
// is still the cursor's, so every rule of leasing (exactly-once
// included) is unchanged. Pure: the leader applies it to the request
// before the lease goes through Raft.
func PreferHeld(n int, next, numSplits int64, held Ranges, limit int) int {
	limit = max(limit, 1)
	n = min(max(n, 1), limit)
	if held.Empty() || next < 0 || next >= numSplits {
		return n
	}
	if held.Contains(next) {
		end := runEnd(held, next)
		return int(min(max(int64(n), min(end, numSplits)-next), int64(limit)))
	}
	if s, ok := firstFrom(held, next); ok && s < next+int64(n) {
		return int(s - next) // >= 1: next itself is not held
	}
	return n
}

// runEnd is the end of the interval of r that contains i.
func runEnd(r Ranges, i int64) int64 {
	for k := 0; k+1 < len(r); k += 2 {
		if r[k] <= i && i < r[k+1] {
			return r[k+1]
		}
	}
	return i
}

// firstFrom is the smallest index of r at or after i.
func firstFrom(r Ranges, i int64) (int64, bool) {
	for k := 0; k+1 < len(r); k += 2 {
		if r[k+1] > i {
			return max(r[k], i), true
		}
	}
	return 0, false
}
