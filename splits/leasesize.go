package splits

// LeaseSize returns how many splits a worker should ask for in one DYNAMIC
// lease, given how many splits of the epoch are still to be handed out, how
// many workers share them and the most one lease may carry:
//
//	clamp(ceil(remaining / (2 * numWorkers)), 1, max)
//
// Early in an epoch that is max: one Raft round trip hands out many splits,
// which is what keeps DYNAMIC as fast as OFF on cheap pipelines. Near the
// end it shrinks towards 1, so the last splits are spread over the workers
// instead of one worker holding a long tail while the others idle: with
// every worker asking for at most half its fair share of what is left, no
// worker can take more than that share in one lease.
//
// remaining <= 0 gives 0 (nothing to ask for); otherwise the result is in
// [1, max]. numWorkers < 1 counts as 1 and max < 1 as 1.
func LeaseSize(remaining int64, numWorkers int, max int) int {
	if remaining <= 0 {
		return 0
	}
	if numWorkers < 1 {
		numWorkers = 1
	}
	if max < 1 {
		max = 1
	}
	d := 2 * int64(numWorkers)
	n := remaining / d
	if remaining%d != 0 {
		n++
	}
	if n > int64(max) {
		return max
	}
	return int(max64(n, 1))
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
