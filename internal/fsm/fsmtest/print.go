package fsmtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/internal/fsm"
	"github.com/feedmesh/feedmesh/internal/splits"
	"github.com/feedmesh/feedmesh/ranges"
)

// Job renders job name as the state holds it, one aspect a line, only
// the aspects the job has; "no job j1" when there is none.
func (e *Env) Job(name string) string {
	v, ok := e.State.Job(name)
	if !ok {
		return fmt.Sprintf("no job %s\n", name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", jobTitle(v), v.State())
	if len(v.Workers) > 0 {
		fmt.Fprintf(&b, "  workers: %s\n", workers(v.Workers))
	}
	if len(v.Consumers) > 0 || len(v.Detached) > 0 {
		fmt.Fprintf(&b, "  consumers: %s\n", consumers(v.Job))
	}
	if d := v.Dynamic; d != nil {
		writeDynamic(&b, d)
	}
	if sc := v.Scale; sc != nil {
		fmt.Fprintf(&b, "  autoscale: %d workers, %v", sc.Workers, sc.Phase)
		if sc.Pause > 0 {
			fmt.Fprintf(&b, ", pausing %d", sc.Pause)
		}
		if sc.Allocated {
			fmt.Fprintf(&b, ", allocated %d (%s)", sc.Allotted, sc.Allocation)
		}
		fmt.Fprintf(&b, ": %s\n", sc.Reason)
	}
	if r := v.Rounds; r != nil {
		fmt.Fprintf(&b, "  rounds: started %v, reached %v, schedule %v\n", r.Started, r.Reached, r.Schedule.Changes)
	}
	if o := v.Offload; o != nil {
		fmt.Fprintf(&b, "  offload: remote off %v, reports %v\n", o.RemoteOff, slices.Sorted(maps.Keys(o.Reports)))
	}
	if f := v.Failure; f != nil {
		fmt.Fprintf(&b, "  failed: %s at %s: %s\n", f.Worker, at(f.At), f.Reason)
	}
	return b.String()
}

// jobTitle is "job j1 (id 2): dynamic exactly-once; 4 splits, 1 epoch".
func jobTitle(v fsm.JobView) string {
	o := v.Options
	kind := string(o.Sharding())
	switch {
	case v.Group:
		kind = "share group of " + v.Fingerprint
	case o.Delivery() == jobspec.ExactlyOnce:
		kind += " " + o.Delivery()
	case v.CountLoss:
		kind += " at-most-once, counting its loss"
	case o.Sharding() == jobspec.Dynamic:
		kind += " at-most-once"
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{o.Share(), "sharing " + v.ShareGroup}, {o.Coordinated(), "coordinated"}, {o.Autoscale(), "autoscaling"}} {
		if f.on {
			kind += ", " + f.name
		}
	}
	if o.MaxWorkers() > 0 {
		kind += fmt.Sprintf(", max %d workers", o.MaxWorkers())
	}
	epochs := fmt.Sprintf("%d epochs", o.Epochs())
	switch o.Epochs() {
	case 1:
		epochs = "1 epoch"
	case -1:
		epochs = "epochs forever"
	}
	return fmt.Sprintf("job %s (id %d): %s; %d splits, %s", v.Name, v.ID, kind, v.NumSplits, epochs)
}

// workers renders "a, b (expired), c@5 (drained)".
func workers(ws map[string]fsm.WorkerState) string {
	var out []string
	for _, w := range slices.Sorted(maps.Keys(ws)) {
		st := ws[w]
		s := w
		if st.Incarnation != 0 {
			s += fmt.Sprintf("@%d", st.Incarnation)
		}
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{st.Expired, "expired"}, {st.Dismissed, "dismissed"}, {st.Drained, "drained"}, {st.Ended, "ended"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		if len(flags) > 0 {
			s += " (" + strings.Join(flags, ", ") + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// consumers renders "c1 until t=30s, c2 (detached)".
func consumers(j fsm.Job) string {
	var out []string
	for _, c := range j.ConsumerIDs() {
		out = append(out, fmt.Sprintf("%s until %s", c, at(j.Consumers[c])))
	}
	for _, c := range slices.Sorted(maps.Keys(j.Detached)) {
		out = append(out, c+" (detached)")
	}
	return strings.Join(out, ", ")
}

// writeDynamic renders a DYNAMIC job's leases: where the hand-out
// stands, who holds what, and (exactly-once) what was produced,
// received, orphaned and fenced.
func writeDynamic(b *strings.Builder, d *splits.DynamicState) {
	p := d.Progress()
	fmt.Fprintf(b, "  epoch %d: %d of %d handed out", p.Epoch, d.Next, d.NumSplits)
	for _, f := range []struct {
		on   bool
		name string
	}{{p.Done, "done"}, {p.Complete, "complete"}} {
		if f.on {
			b.WriteString(", " + f.name)
		}
	}
	fmt.Fprintf(b, "; leased %d, finished %d, lost %d", p.Total.Leased, p.Total.Finished, p.Total.Lost)
	if p.Total.HandedBack > 0 {
		fmt.Fprintf(b, ", handed back %d", p.Total.HandedBack)
	}
	b.WriteString("\n")
	writeBy(b, "leased", d.Outstanding, func(w string) string { return w })
	if x := d.Exact; x != nil {
		writeSets(b, "produced", x.Produced, func(p splits.ProducedSplit) string { return p.Emitted.String() + " by " + p.Worker })
		writeSets(b, "received", x.Delivered, ranges.Set.String)
		writeBy(b, "orphaned", x.Orphaned, func(w string) string { return "of " + w })
		for _, w := range slices.Sorted(maps.Keys(x.Fences)) {
			fmt.Fprintf(b, "  fence of %s awaited from %s\n", w, strings.Join(x.Fences[w], ", "))
		}
		writeSets(b, "in census", x.Censusing, func(bool) string { return "" })
		writeSets(b, "forfeit", x.Forfeit, ranges.Set.String)
		c := x.Counts
		fmt.Fprintf(b, "  elements: delivered %d, duplicates %d, requeued %d", c.Delivered, c.Duplicates, c.Requeued)
		if x.Census {
			fmt.Fprintf(b, ", lost %d, censused %d", c.Lost, c.Censused)
		}
		if c.Abandoned > 0 || c.Skipped > 0 {
			fmt.Fprintf(b, ", abandoned %d, skipped %d", c.Abandoned, c.Skipped)
		}
		b.WriteString("\n")
	}
	if r := d.Resume; r != nil {
		fmt.Fprintf(b, "  resumed from job %d: checkpoints of %v, %d wanted", r.From, r.Parts, r.Want)
		if d.Waiting() {
			b.WriteString(", waiting")
		}
		b.WriteString("\n")
	}
}

// writeBy renders epoch → split → holder as "leased e0: 0 1 (a), 2 (b)".
func writeBy(b *strings.Builder, what string, m map[int64]map[int64]string, holder func(string) string) {
	for _, e := range slices.Sorted(maps.Keys(m)) {
		by := map[string][]int64{}
		for s, w := range m[e] {
			by[w] = append(by[w], s)
		}
		var parts []string
		for _, w := range slices.Sorted(maps.Keys(by)) {
			parts = append(parts, fmt.Sprintf("%s (%s)", ints(slices.Sorted(slices.Values(by[w]))), holder(w)))
		}
		if len(parts) > 0 {
			fmt.Fprintf(b, "  %s e%d: %s\n", what, e, strings.Join(parts, ", "))
		}
	}
}

// writeSets renders epoch → split → value as "produced e0: 0 [0,3) by a".
func writeSets[V any](b *strings.Builder, what string, m map[int64]map[int64]V, show func(V) string) {
	for _, e := range slices.Sorted(maps.Keys(m)) {
		var parts []string
		for _, s := range slices.Sorted(maps.Keys(m[e])) {
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("%d %s", s, show(m[e][s]))))
		}
		if len(parts) > 0 {
			fmt.Fprintf(b, "  %s e%d: %s\n", what, e, strings.Join(parts, ", "))
		}
	}
}

// ints renders "0 1 2".
func ints(xs []int64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}

// lease renders a lease as the example scripts read: "splits 0 1 epoch 0".
func lease(l splits.Lease) string {
	s := fmt.Sprintf("splits %s epoch %d", ints(l.Splits), l.Epoch)
	if len(l.Splits) == 0 {
		s = fmt.Sprintf("no splits, epoch %d", l.Epoch)
	}
	for i, ex := range l.Exclude {
		if !ex.Empty() && i < len(l.Splits) {
			s += fmt.Sprintf("; split %d without %v", l.Splits[i], ex)
		}
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{l.Census, "census"}, {l.Done, "done"}, {l.AllProduced, "all produced"}} {
		if f.on {
			s += "; " + f.name
		}
	}
	if l.Cut > 0 {
		s += fmt.Sprintf("; cut after %d ops", l.Cut)
	}
	return s
}
