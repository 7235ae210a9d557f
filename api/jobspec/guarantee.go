package jobspec

// Guarantees of the composition table (compose.go): what a combination
// that works promises about the elements its consumers receive.

// Guarantee is what a combination that works guarantees about the
// elements its consumers receive per epoch, whatever worker dies
// (docs/jobs/composition.md).
type Guarantee struct {
	// Copies: each element is read by one worker (1), or by every worker
	// (0: sharding off, a copy per worker).
	Copies int
	// Exact: every element arrives exactly Copies times per epoch, a dead
	// worker's share read again by the others. Otherwise each arrives at
	// most Copies times per epoch (a dead worker's share lost; with
	// sharding off, a dead worker's copy ends early).
	Exact bool
	// LossCounted: the elements lost are counted exactly
	// (Stats().ElementsLost: the dataset minus what arrived).
	LossCounted bool
	// Subset: take or skip count per worker pipeline, so what arrives is
	// a subset of the dataset (bounded by Copies per epoch).
	Subset bool
	// Window: the job's take and skip select the epoch's elements at
	// positions [skip, skip+take) of the epoch's order (split order, then
	// index in the split; pipeline.FoldTakeSkip), whichever worker reads
	// them: Exact, LossCounted and Copies hold of those elements.
	Window bool
}

// String says the guarantee in the table's words.
func (g Guarantee) String() string {
	var s string
	switch {
	case g.Copies == 0:
		s = "each element once per worker per epoch (a dead worker's copy ends early)"
	case g.Exact:
		s = "exactly once per epoch"
	case g.LossCounted:
		s = "at most once per epoch, loss counted exactly"
	default:
		s = "at most once per epoch"
	}
	switch {
	case g.Subset:
		s += "; take/skip per worker: a subset"
	case g.Window:
		s += ", of the elements take/skip select in the epoch's order"
	}
	return s
}

// GuaranteeOf is the guarantee of normalized options n with spec
// features f, which CheckSpec accepted.
func GuaranteeOf(n Normalized, f SpecFeatures) Guarantee {
	j := n.job.o
	g := Guarantee{Copies: 1, Subset: f.Take || f.Skip}
	if g.Subset && j.Sharding == Dynamic && f.PerWorker == "" {
		g.Subset, g.Window = false, true
	}
	switch {
	case j.Sharding == Off:
		g.Copies = 0
	case j.Delivery == ExactlyOnce:
		g.Exact = true
	case j.Delivery == AtMostOnce && !j.Share && !j.Coordinated && !g.Subset:
		g.LossCounted = true
	}
	return g
}

// Guarantee is the combination's guarantee; it must work (Check).
func (c Combo) Guarantee() Guarantee {
	n, err := c.Options("composition").Normalize()
	if err != nil {
		return Guarantee{}
	}
	return GuaranteeOf(n, c.Spec())
}
