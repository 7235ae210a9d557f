package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// RunOptions configure RunLocal.
type RunOptions struct {
	// Take stops after this many outputs of the last op (0: run to the end).
	Take int64
	// DisableStats turns per-op statistics off.
	DisableStats bool
}

// RunReport is what RunLocal measured; it is also the JSON that
// `feedmesh run-local --json` prints.
type RunReport struct {
	// Fingerprint identifies the dataset.
	Fingerprint string `json:"fingerprint"`
	// Elements counts what the last op emitted; when the spec batches, it
	// counts the rows inside the batches and Batches the batches.
	Elements int64 `json:"elements"`
	Batches  int64 `json:"batches"`
	// Bytes is the payload of everything emitted.
	Bytes int64 `json:"bytes"`
	// Seconds is the wall time from Open to the last element.
	Seconds           float64 `json:"seconds"`
	ElementsPerSecond float64 `json:"elements_per_second"`
	BytesPerSecond    float64 `json:"bytes_per_second"`
	// Ops has the source first, then one entry per op.
	Ops []OpStats `json:"ops"`
	// BoundingOp names the op that bounds throughput ("" if unknown).
	BoundingOp string `json:"bounding_op"`
	// Bounding is the index of that op in Ops, or -1.
	Bounding int `json:"bounding"`
}

// RunLocal runs spec in-process over all its splits and reports throughput
// and per-op statistics. It is the engine of `feedmesh run-local`.
func RunLocal(ctx context.Context, spec *Spec, o RunOptions) (*RunReport, error) {
	fp, err := spec.Fingerprint()
	if err != nil {
		return nil, err
	}
	splits, err := Splits(spec)
	if err != nil {
		return nil, err
	}
	batched := false
	for i := range spec.Ops {
		batched = batched || spec.Ops[i].batches()
	}
	start := time.Now()
	it, err := OpenWithOptions(ctx, spec, splits, Options{DisableStats: o.DisableStats})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	r := &RunReport{Fingerprint: fp, Bounding: -1}
	for o.Take <= 0 || r.Batches+boolInt(!batched)*r.Elements < o.Take {
		e, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		r.Bytes += int64(e.ByteSize())
		if batched {
			r.Batches++
			if len(e.Tensors) > 0 && len(e.Tensors[0].Shape) > 0 {
				r.Elements += e.Tensors[0].Shape[0]
			}
		} else {
			r.Elements++
		}
		if rc, ok := it.(Recycler); ok {
			rc.Recycle(e) // counted: its buffers may back a later batch
		}
	}
	elapsed := time.Since(start)
	it.Close() // stop read-ahead first, so the counts agree with each other
	st := it.Stats()
	r.Seconds = elapsed.Seconds()
	if r.Seconds > 0 {
		r.ElementsPerSecond = float64(r.Elements) / r.Seconds
		r.BytesPerSecond = float64(r.Bytes) / r.Seconds
	}
	r.Ops, r.Bounding = st.Ops, st.Bounding
	if st.Bounding >= 0 {
		r.BoundingOp = st.Ops[st.Bounding].Name
	}
	return r, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// WriteTable prints the report for people: throughput, then one line per op
// with the bounding op marked by "*".
func (r *RunReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "dataset %s\n", r.Fingerprint)
	if r.Batches > 0 {
		fmt.Fprintf(w, "%d elements in %d batches, %s in %.3f s: %.0f elements/s, %.1f batches/s, %s/s\n",
			r.Elements, r.Batches, HumanBytes(float64(r.Bytes)), r.Seconds, r.ElementsPerSecond,
			float64(r.Batches)/max(r.Seconds, 1e-9), HumanBytes(r.BytesPerSecond))
	} else {
		fmt.Fprintf(w, "%d elements, %s in %.3f s: %.0f elements/s, %s/s\n",
			r.Elements, HumanBytes(float64(r.Bytes)), r.Seconds, r.ElementsPerSecond, HumanBytes(r.BytesPerSecond))
	}
	if len(r.Ops) == 0 {
		_, err := fmt.Fprintln(w, "(statistics off)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\top\tpar\telements_in\telements_out\tbytes_out\tbusy_s\twait_s\tstall_s\t")
	for i, o := range r.Ops {
		mark := ""
		if i == r.Bounding {
			mark = "*"
		}
		in := fmt.Sprint(o.ElementsIn)
		if o.Index < 0 {
			in = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%.3f\t%.3f\t%.3f\t\n", mark, o.Name, o.Parallelism, in, o.ElementsOut,
			HumanBytes(float64(o.BytesOut)), o.BusySeconds, o.WaitSeconds, o.StallSeconds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range r.Ops {
		var notes []string
		if o.Skipped > 0 {
			notes = append(notes, fmt.Sprintf("%d bad records skipped", o.Skipped))
		}
		if o.Replaced > 0 {
			notes = append(notes, fmt.Sprintf("%d lines with invalid UTF-8 repaired (U+FFFD)", o.Replaced))
		}
		if o.PackedTokens+o.PaddingTokens > 0 {
			notes = append(notes, fmt.Sprintf("%d tokens packed, %d padding (%.1f %% of the rows)", o.PackedTokens, o.PaddingTokens, 100*o.PaddingFraction))
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "%s: %s\n", o.Name, strings.Join(notes, ", "))
		}
	}
	if r.Bounding >= 0 {
		fmt.Fprintf(w, "* bounds throughput: %s (its consumer waited longest on it: stall_s)\n", r.BoundingOp)
	}
	return nil
}

// HumanBytes writes a byte count in decimal units (1.5 MB).
func HumanBytes(b float64) string {
	units := []string{"B", "KB", "MB", "GB", "TB"}
	i := 0
	for b >= 1000 && i < len(units)-1 {
		b /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
