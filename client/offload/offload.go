// Package offload decides, purely, how a trainer's host and the mesh share
// a pipeline's work, after FastFlow (Um et al., VLDB'23, Algorithm 1):
// when to offload (only when the trainer stalls on data and offloading
// would speed it up by more than a threshold), which ops (where to cut the
// pipeline: the ops before the cut run on remote workers, the rest on the
// trainer's host) and how much (the fraction of elements the mesh
// prepares; the host prepares the rest).
//
// The inputs are rates (elements per second into the training loop) and
// local CPU costs, measured by profiling a few hundred elements (the
// client does that) or estimated from per-op costs, element sizes and the
// link's throughput (Estimate). Nothing here measures or reads a clock.
package offload

import (
	"errors"
	"fmt"
	"math"
)

// Candidate is one way to cut the pipeline: its ops [0, Cut) run
// remotely, the rest locally.
type Candidate struct {
	Cut int
	// Remote (FastFlow's Rthp) is the training throughput when every
	// element goes through the remote part: bounded by the remote
	// workers, the link, and the local part's own cost.
	Remote float64
	// OverheadRatio (FastFlow's Ocycle/Pcycle) is the local CPU an
	// element costs with this cut (receiving, decoding, the local part)
	// over what it costs when the whole pipeline runs locally.
	OverheadRatio float64
}

// Profile is what the decision needs.
type Profile struct {
	// Ingest (Gthp) is the training loop's rate with data always ready.
	Ingest float64
	// Local (Lthp) is the training rate with the whole pipeline on the
	// host, within its CPU budget.
	Local float64
	// Candidates are the cuts to consider (at least one for an offload).
	Candidates []Candidate
}

// Config are the policy's knobs.
type Config struct {
	// SpeedUp is the least relative gain that justifies offloading
	// (FastFlow: 10 %): Ingest/Local below 1+SpeedUp keeps everything local.
	SpeedUp float64
	// Hysteresis is how much better a new decision's predicted rate must
	// be than the one in force for Revise to switch (measurements are
	// noisy; switching costs a pipeline restart).
	Hysteresis float64
}

// DefaultConfig has FastFlow's threshold and a 5 % hysteresis.
func DefaultConfig() Config { return Config{SpeedUp: 0.10, Hysteresis: 0.05} }

// Decision is how to run the pipeline.
type Decision struct {
	// Offload is false when everything runs locally (no remote worker).
	Offload bool
	// Cut is the chosen cut (when Offload).
	Cut int
	// Fraction is the share of elements the mesh prepares, in (0, 1]
	// (when Offload); the host prepares the rest through the whole
	// pipeline.
	Fraction float64
	// Capacity (when Offload): neither side covers the trainer alone, so
	// both should prepare all they can. Fraction is then what their
	// capacities predict, not a share to hold either side to: holding
	// the faster side to it would make it wait for the slower one.
	Capacity bool
	// Predicted is the training rate the decision expects.
	Predicted float64
	// Reason says why, for the stats and `feedmesh jobs`.
	Reason string
}

// Decide applies FastFlow's policy to p.
func Decide(p Profile, c Config) (Decision, error) {
	if err := p.validate(); err != nil {
		return Decision{}, err
	}
	if p.Ingest <= p.Local || p.Ingest < p.Local*(1+c.SpeedUp) {
		return Decision{Predicted: min(p.Ingest, p.Local), Reason: fmt.Sprintf(
			"no stall worth offloading: the host prepares %.4g elements/s, the trainer takes %.4g (gain below %.0f %%): everything local, no remote worker",
			p.Local, p.Ingest, 100*c.SpeedUp)}, nil
	}
	if len(p.Candidates) == 0 {
		return Decision{}, errors.New("offload: the trainer stalls but no cut of the pipeline can run remotely")
	}
	best, bestScore := p.Candidates[0], math.Inf(-1)
	for _, cd := range p.Candidates {
		// The local part still runs with each offloaded element's
		// overhead (line 7: Lthp·(1 − Ocycle/Pcycle) + Rthp).
		if s := p.Local*(1-cd.OverheadRatio) + cd.Remote; s > bestScore {
			best, bestScore = cd, s
		}
	}
	if bestScore < p.Local*(1+c.SpeedUp) {
		// FastFlow's "when", on the candidates: offloading must pay its
		// threshold too, not only the stall (a slow link can make the
		// mesh's share worth less than what receiving it costs the host).
		return Decision{Predicted: min(p.Ingest, p.Local), Reason: fmt.Sprintf(
			"offloading does not pay: the host prepares %.4g elements/s, with the mesh (%.4g through cut %d) it would be %.4g (gain below %.0f %%): everything local, no remote worker",
			p.Local, best.Remote, best.Cut, bestScore, 100*c.SpeedUp)}, nil
	}
	upper := best.Remote
	lower := (p.Ingest - p.Local) * (1 + best.OverheadRatio)
	var frac float64
	var why string
	capacity := false
	if lower < upper {
		frac = min(upper/p.Ingest, 1)
		why = fmt.Sprintf("the mesh (%.4g elements/s through cut %d) covers the host's shortfall (%.4g)", upper, best.Cut, lower)
	} else {
		frac = upper / (p.Local + upper)
		capacity = true
		why = fmt.Sprintf("neither side covers the trainer alone (mesh %.4g, host %.4g elements/s): shared by capacity", upper, p.Local)
	}
	pred := min(p.Ingest, bestScore)
	return Decision{Offload: true, Cut: best.Cut, Fraction: frac, Capacity: capacity, Predicted: pred,
		Reason: fmt.Sprintf("the trainer takes %.4g elements/s, the host alone prepares %.4g: %s; %.0f %% remote", p.Ingest, p.Local, why, 100*frac)}, nil
}

// Revise decides again on a new profile. A change of cut (or between
// local and offloading) restarts the pipeline, so it happens only when the
// new decision predicts more than Hysteresis above the best that prev's
// cut can do on the new profile, or, from offloading back to local, when
// offloading gains less than SpeedUp − Hysteresis over the host alone;
// within a cut, the fraction follows the new rates once it moves by more
// than Hysteresis.
func Revise(prev Decision, p Profile, c Config) (Decision, error) {
	next, err := Decide(p, c)
	if err != nil {
		return prev, err
	}
	if next.Offload == prev.Offload && next.Cut == prev.Cut {
		if next.Capacity == prev.Capacity && math.Abs(next.Fraction-prev.Fraction) <= c.Hysteresis {
			return prev, nil
		}
		return next, nil
	}
	stay, ok := bestWithCut(prev, p, c)
	if ok && prev.Offload && !next.Offload && stay.Predicted < p.Local*(1+c.SpeedUp-c.Hysteresis) {
		// Offloading no longer pays even its threshold less the
		// hysteresis: back to local (entering needed the whole
		// threshold, so a rate near it does not flip the decision).
		return next, nil
	}
	if ok && next.Predicted <= stay.Predicted*(1+c.Hysteresis) {
		if stay.Capacity == prev.Capacity && math.Abs(stay.Fraction-prev.Fraction) <= c.Hysteresis {
			return prev, nil
		}
		return stay, nil
	}
	return next, nil
}

// bestWithCut is the decision keeping prev's mode and cut on p.
func bestWithCut(prev Decision, p Profile, c Config) (Decision, bool) {
	if !prev.Offload {
		return Decision{Predicted: min(p.Ingest, p.Local), Reason: prev.Reason}, true
	}
	for _, cd := range p.Candidates {
		if cd.Cut == prev.Cut {
			q := p
			q.Candidates = []Candidate{cd}
			c.SpeedUp = -1 // keep offloading: only the fraction is in question
			d, err := Decide(q, c)
			return d, err == nil && d.Offload
		}
	}
	return Decision{}, false
}

func (p Profile) validate() error {
	if !(p.Ingest > 0) || !(p.Local > 0) || math.IsInf(p.Ingest, 0) || math.IsInf(p.Local, 0) {
		return fmt.Errorf("offload: ingest %v and local %v elements/s must be finite and > 0", p.Ingest, p.Local)
	}
	for _, c := range p.Candidates {
		if c.Cut < 1 || !(c.Remote >= 0) || math.IsInf(c.Remote, 0) || !(c.OverheadRatio >= 0 && c.OverheadRatio < 1) {
			return fmt.Errorf("offload: candidate %+v: want cut >= 1, remote >= 0 and overhead in [0, 1)", c)
		}
	}
	return nil
}

// OpCost is one op as profiled on the host: local CPU seconds per element
// it outputs (at one core) and bytes per output element.
type OpCost struct {
	CPUSeconds float64
	Bytes      float64
}

// Env is what the estimate needs beside the ops.
type Env struct {
	// Ingest is the training loop's rate with data always ready.
	Ingest float64
	// LocalCores is the host's CPU budget for the pipeline.
	LocalCores float64
	// RemoteCores is the mesh's cores for the job (workers × cores).
	RemoteCores float64
	// LinkBytesPerSecond is the link's throughput into the host.
	LinkBytesPerSecond float64
	// ReceiveSecondsPerByte is the host's CPU to receive and decode a
	// byte from the mesh (the offload's overhead, Ocycle's source).
	ReceiveSecondsPerByte float64
	// SourceBytes is what one source element weighs (read from storage).
	SourceBytes float64
}

// Estimate builds a Profile from per-op costs (FastFlow measures the
// rates instead; the client can do either). The client's auto does not
// use it: it measures whole-pipeline rates for Decide and chooses a cut
// with BestCut, which models each op at its own parallelism and runs no
// local worker beside the cut (Estimate's candidates assume one shared
// pool of cores and a local share beside every cut). The candidates cut after each
// op: the ops before the cut run remotely at RemoteCores, their output
// crosses the link, the rest runs on the host.
func Estimate(ops []OpCost, e Env) (Profile, error) {
	if len(ops) == 0 {
		return Profile{}, errors.New("offload: a pipeline of no op")
	}
	var all float64
	for _, o := range ops {
		if o.CPUSeconds < 0 || o.Bytes < 0 {
			return Profile{}, fmt.Errorf("offload: op cost %+v: want >= 0", o)
		}
		all += o.CPUSeconds
	}
	if !(e.LocalCores > 0) || !(e.Ingest > 0) || e.RemoteCores < 0 || e.LinkBytesPerSecond < 0 {
		return Profile{}, fmt.Errorf("offload: environment %+v: want ingest and local cores > 0, the rest >= 0", e)
	}
	rate := func(cores, seconds float64) float64 {
		if seconds <= 0 {
			return math.Inf(1)
		}
		return cores / seconds
	}
	p := Profile{Ingest: e.Ingest, Local: min(rate(e.LocalCores, all), 1e12)}
	var prefix float64
	for cut := 1; cut <= len(ops); cut++ {
		prefix += ops[cut-1].CPUSeconds
		rest := all - prefix
		wire := ops[cut-1].Bytes
		remote := rate(e.RemoteCores, prefix)
		if wire > 0 && e.LinkBytesPerSecond > 0 {
			remote = min(remote, e.LinkBytesPerSecond/wire)
		} else if e.LinkBytesPerSecond == 0 {
			remote = 0
		}
		local := rest + wire*e.ReceiveSecondsPerByte // host CPU per offloaded element
		remote = min(remote, rate(e.LocalCores, local))
		if e.RemoteCores == 0 {
			remote = 0
		}
		ratio := 0.0
		if all > 0 {
			ratio = min(local/all, 0.999)
		}
		p.Candidates = append(p.Candidates, Candidate{Cut: cut, Remote: min(remote, 1e12), OverheadRatio: ratio})
	}
	return p, nil
}

// OpRate is one op of a pipeline as profiled on the host, for choosing a
// cut: the time one element spends in it (summed over its goroutines: at
// one goroutine, 1/Seconds elements per second), the goroutines the spec
// gives it (where the op runs: on each node, and in the client after a
// cut), and what an element weighs after it.
type OpRate struct {
	Seconds     float64 `json:"seconds"`
	Parallelism int     `json:"parallelism"`
	Bytes       float64 `json:"bytes"`
}

// CutEnv is what choosing a cut needs beside the ops.
type CutEnv struct {
	// Ingest is the training loop's rate with data always ready.
	Ingest float64
	// Nodes is how many nodes would run the prefix.
	Nodes int
	// LinkBytesPerSecond is the link's throughput into the host, as
	// measured (at least what crossed it; 0: unknown, no cut is chosen).
	LinkBytesPerSecond float64
	// Allowed are the cuts the spec has (Spec.CheckCut), each in
	// [1, len(ops)].
	Allowed []int
}

// CutChoice is the best cut and the rate it predicts.
type CutChoice struct {
	Cut  int
	Rate float64
	// Remote, Wire and Suffix are the bounds it is the least of: the
	// nodes running the prefix, the link carrying what the prefix makes,
	// the host running the rest.
	Remote, Wire, Suffix float64
}

// BestCut predicts, for each allowed cut, the training rate of a partial
// offload (the nodes run ops [0, cut) at their parallelism, ship each
// element over the link, and the host runs the rest, with no local worker
// beside it) and returns the best. ok is false when nothing can be
// predicted (no allowed cut, no op, an unknown link).
func BestCut(ops []OpRate, e CutEnv) (best CutChoice, ok bool) {
	if len(ops) == 0 || e.Nodes <= 0 || !(e.LinkBytesPerSecond > 0) || !(e.Ingest > 0) {
		return CutChoice{}, false
	}
	rate := func(o OpRate, copies float64) float64 {
		if !(o.Seconds > 0) {
			return math.Inf(1)
		}
		return copies * float64(max(o.Parallelism, 1)) / o.Seconds
	}
	for _, cut := range e.Allowed {
		if cut < 1 || cut > len(ops) {
			continue
		}
		c := CutChoice{Cut: cut, Remote: math.Inf(1), Wire: math.Inf(1), Suffix: math.Inf(1)}
		for _, o := range ops[:cut] {
			c.Remote = min(c.Remote, rate(o, float64(e.Nodes)))
		}
		if b := ops[cut-1].Bytes; b > 0 {
			c.Wire = e.LinkBytesPerSecond / b
		}
		for _, o := range ops[cut:] {
			c.Suffix = min(c.Suffix, rate(o, 1))
		}
		c.Rate = min(e.Ingest, c.Remote, c.Wire, c.Suffix)
		if !ok || c.Rate > best.Rate {
			best, ok = c, true
		}
	}
	return best, ok
}

// WholeRate predicts, on BestCut's model, the training rate without a
// cut: the nodes run every op at their parallelism and ship batches whose
// rows weigh what an element weighs at the last allowed cut point (just
// before the first op that batches). A cut is worth its per-element
// shipping (a frame and a receipt per element instead of per batch,
// which the model does not count) only when it beats this: on this model
// only a link that binds the whole pipeline's rows, and not the cut's
// elements, makes it, so a co-located mesh or a fast link is never cut.
// 0 when nothing can be predicted (no op, no node, no ingest).
func WholeRate(ops []OpRate, e CutEnv) float64 {
	if len(ops) == 0 || e.Nodes <= 0 || !(e.Ingest > 0) {
		return 0
	}
	r := e.Ingest
	for _, o := range ops {
		if o.Seconds > 0 {
			r = min(r, float64(e.Nodes)*float64(max(o.Parallelism, 1))/o.Seconds)
		}
	}
	last := 0
	for _, c := range e.Allowed {
		if c >= 1 && c <= len(ops) {
			last = max(last, c)
		}
	}
	if last > 0 && e.LinkBytesPerSecond > 0 {
		if b := ops[last-1].Bytes; b > 0 {
			r = min(r, e.LinkBytesPerSecond/b)
		}
	}
	return r
}
