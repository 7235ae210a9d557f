package bucketing

import "math"

// The step-time model of the coordinated-reads benchmark. There are no
// accelerators here, so a synchronous data-parallel step is modelled as
// taking as long as its slowest consumer, and a consumer's time as
// proportional to the tokens of its padded batch (padding costs compute like
// real tokens do).

// PaddedTokens is the token count of a batch padded to its longest element:
// len(lengths) × max(lengths). Negative lengths count as 0; the result
// saturates at math.MaxInt64 instead of overflowing.
func PaddedTokens(lengths []int64) int64 {
	var longest int64
	for _, l := range lengths {
		longest = max(longest, l)
	}
	n := int64(len(lengths))
	if longest > 0 && n > math.MaxInt64/longest {
		return math.MaxInt64
	}
	return n * longest
}

// StepTime is the modelled time of one training step: the maximum over
// consumers of paddedTokens[i] × perToken (every consumer waits for the
// slowest). No consumers, negative token counts, and a perToken that is not
// a positive number all count as 0.
func StepTime(paddedTokens []int64, perToken float64) float64 {
	if !(perToken > 0) { // also catches NaN
		return 0
	}
	var most int64
	for _, t := range paddedTokens {
		most = max(most, t)
	}
	return float64(most) * perToken
}

// PaddingFraction is the share of padded tokens that are padding:
// 1 - realTokens/paddedTokens, clamped to [0, 1], and 0 when paddedTokens <=
// 0.
func PaddingFraction(realTokens, paddedTokens int64) float64 {
	if paddedTokens <= 0 {
		return 0
	}
	f := 1 - float64(max(realTokens, 0))/float64(paddedTokens)
	return min(max(f, 0), 1)
}
