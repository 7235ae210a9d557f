package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Workers says how many nodes serve a job (JobOptions.Workers): AutoWorkers
// (the cluster chooses from the consumers' batch time, after Cachew), a
// fixed count (FixedWorkers(n), "n" on the wire), or AllWorkers (every live
// node). The zero value asks for the job's default: AutoWorkers for the
// jobs that can autoscale (DYNAMIC sharding without Share or Coordinated),
// AllWorkers for the others; a job that sets only MaxWorkers n (as before
// Workers existed) gets n, and one that sets only Autoscale gets auto.
type Workers string

// The worker choices that are not a count.
const (
	AutoWorkers Workers = "auto"
	AllWorkers  Workers = "all"
)

// FixedWorkers is a fixed count of n workers.
func FixedWorkers(n int) Workers { return Workers(strconv.Itoa(n)) }

// ParseWorkers parses a worker choice as the CLI and the Python client take
// it: "auto", "all" or a count >= 1 (case-insensitive; "" is the default).
func ParseWorkers(s string) (Workers, error) {
	w := Workers(strings.ToLower(strings.TrimSpace(s)))
	if _, _, err := w.count(); err != nil {
		return "", err
	}
	return w, nil
}

// count returns the fixed count (n >= 1) or, for "", auto and all, 0, and
// whether the choice is a count.
func (w Workers) count() (int, bool, error) {
	switch w {
	case "", AutoWorkers, AllWorkers:
		return 0, false, nil
	}
	n, err := strconv.Atoi(string(w))
	if err != nil || n < 1 {
		return 0, false, fmt.Errorf("workers %q: want auto (the cluster chooses), all (every node) or a count >= 1", string(w))
	}
	return n, true, nil
}

// Count is the fixed count of workers, or 0 for auto, all and the default.
func (w Workers) Count() int {
	n, _, _ := w.count()
	return n
}

// UnmarshalJSON takes a string ("auto", "all", "4") or a number (4), so
// that the Python client's workers=4 and workers="all" both decode.
func (w *Workers) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '"' {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("workers %s: want \"auto\", \"all\" or a count >= 1", b)
		}
		*w = FixedWorkers(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*w = Workers(s)
	return nil
}

// autoscalable reports whether a job of these options can autoscale:
// DYNAMIC sharding (splits leased first-come-first-served, so any number
// of workers reads each element once) without Share (whose workers each
// produce for every sharing job) or Coordinated reads (whose round
// rotation is agreed per worker).
func (o JobOptions) autoscalable() bool {
	return o.Sharding == Dynamic && !o.Share && !o.Coordinated
}

// withWorkerDefaults fills Workers from the older fields, or the default,
// and the older fields from Workers (Autoscale for auto, MaxWorkers for a
// count), so that a node that reads only the older fields does the same.
// Sharding must be filled already.
func (o JobOptions) withWorkerDefaults() JobOptions {
	o.Workers = Workers(strings.ToLower(strings.TrimSpace(string(o.Workers))))
	switch {
	case o.Workers != "":
	case o.Autoscale:
		o.Workers = AutoWorkers
	case o.MaxWorkers > 0:
		o.Workers = FixedWorkers(o.MaxWorkers)
	case o.autoscalable():
		o.Workers = AutoWorkers
	default:
		o.Workers = AllWorkers
	}
	switch n := o.Workers.Count(); {
	case o.Workers == AutoWorkers:
		o.Autoscale = true
	case n > 0 && o.MaxWorkers == 0:
		o.MaxWorkers = n
	}
	return o
}

// validateWorkers rejects a Workers choice the job cannot have, or one
// that contradicts MaxWorkers or Autoscale.
func (o JobOptions) validateWorkers() error {
	n, fixed, err := o.Workers.count()
	if err != nil {
		return err
	}
	switch {
	case o.Workers == AutoWorkers && !o.autoscalable():
		what := fmt.Sprintf("sharding %s", o.Sharding)
		switch {
		case o.Coordinated:
			what = "coordinated reads (every worker has its turn in the round rotation)"
		case o.Share:
			what = "share (each worker produces for every sharing job)"
		case o.Sharding == Off:
			what = "sharding off (each worker reads the whole dataset, so the count changes the data)"
		case o.Sharding == Static:
			what = "sharding static (the worker list is fixed at the job's start)"
		}
		return fmt.Errorf("workers auto: only DYNAMIC jobs without share or coordinated reads autoscale; a job with %s takes workers all or a fixed count", what)
	case o.Autoscale && o.Workers != AutoWorkers:
		return fmt.Errorf("workers %s: contradicts autoscale (which is workers auto)", o.Workers)
	case o.Workers == AllWorkers && o.MaxWorkers > 0:
		return fmt.Errorf("workers all: contradicts max_workers %d (every node serves the job; use workers %d for a fixed count)", o.MaxWorkers, o.MaxWorkers)
	case fixed && o.MaxWorkers != n:
		return fmt.Errorf("workers %d: contradicts max_workers %d (set one of them)", n, o.MaxWorkers)
	}
	return o.validateAutoscaleTuning()
}

// MaxAutoscaleMetrics bounds AutoscaleRevisit and AutoscalePause.
const MaxAutoscaleMetrics = 1000

// validateAutoscaleTuning rejects autoscaling knobs out of range, or set
// on a job that does not autoscale.
func (o JobOptions) validateAutoscaleTuning() error {
	switch {
	case o.AutoscaleThreshold == 0 && o.AutoscaleRevisit == 0 && o.AutoscalePause == 0:
		return nil
	case o.Workers != AutoWorkers && !o.Autoscale:
		return fmt.Errorf("autoscale_threshold, autoscale_revisit, autoscale_pause: tune workers auto, not workers %s", o.Workers)
	case !(o.AutoscaleThreshold >= 0 && o.AutoscaleThreshold < 1):
		return fmt.Errorf("autoscale_threshold %v: want a relative batch-time gain in (0, 1), e.g. 0.03 (0: the default)", o.AutoscaleThreshold)
	case o.AutoscaleRevisit < 0 || o.AutoscaleRevisit > MaxAutoscaleMetrics:
		return fmt.Errorf("autoscale_revisit %d: want 1..%d metrics (0: the default, 10)", o.AutoscaleRevisit, MaxAutoscaleMetrics)
	case o.AutoscalePause < -1 || o.AutoscalePause > MaxAutoscaleMetrics:
		return fmt.Errorf("autoscale_pause %d: want 1..%d metrics, or -1 for none (0: the default, 2)", o.AutoscalePause, MaxAutoscaleMetrics)
	}
	return nil
}
