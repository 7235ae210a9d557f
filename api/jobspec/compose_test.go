package jobspec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// product calls f with every index tuple of ComboValues, in Dims' order.
func product(f func(idx []int)) {
	idx := make([]int, len(Dims))
	for {
		f(idx)
		i := len(idx) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(ComboValues[Dims[i]]) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

// effective is the test's own model of the defaults (written out here,
// not taken from Normalize): each dimension's value in Values.
func effective(c Combo) map[Dim]string {
	onOff := func(b bool) string {
		if b {
			return ValOn
		}
		return ValOff
	}
	sh := string(c.Sharding)
	if sh == "" {
		sh = string(Off)
		if c.Coordinated {
			sh = string(Dynamic)
		}
	}
	del := c.Delivery
	if del == "" {
		switch {
		case sh != string(Dynamic):
			del = ValNone
		case c.Share:
			del = AtMostOnce
		default:
			del = ExactlyOnce
		}
	}
	w := string(c.Workers)
	switch {
	case w == "2":
		w = ValCount
	case w == "" && sh == string(Dynamic) && !c.Share && !c.Coordinated:
		w = string(AutoWorkers)
	case w == "":
		w = string(AllWorkers)
	}
	off := c.Offload
	switch off {
	case "":
		off = OffloadAuto
	case "0.5":
		off = ValFraction
	}
	ts := c.TakeSkip
	if ts == "" {
		ts = ValNone
	}
	ep := ValOneEpoch
	if c.Epochs > 1 {
		ep = ValEpochs
	}
	ord := ValAny
	if c.Order != "" {
		ord = c.Order
	}
	return map[Dim]string{DimSharding: sh, DimDelivery: del, DimOffload: off, DimWorkers: w, DimShare: onOff(c.Share),
		DimCoordinated: onOff(c.Coordinated), DimAutocache: onOff(c.Autocache), DimTakeSkip: ts, DimEpochs: ep, DimResume: onOff(c.Resume),
		DimOrder: ord}
}

// TestCompositionFullProduct: over the full product of every dimension's
// representative values, the options either work (Check nil: Normalize
// and CheckSpec accept them) or are refused with a ConflictError naming
// two options, and the refusal is the first rule of Conflicts the cell
// meets under the test's own model of the defaults. Every rule refuses
// some cell, and every value of every dimension works in some cell.
func TestCompositionFullProduct(t *testing.T) {
	var total, works int
	perRule := make([]int, len(Conflicts))
	worksWith := map[Dim]map[string]bool{}
	product(func(idx []int) {
		total++
		c := ComboAt(idx)
		eff := effective(c)
		want := -1
		for i, r := range Conflicts {
			if slices.Contains(r.AValues, eff[r.A]) && slices.Contains(r.BValues, eff[r.B]) {
				want = i
				break
			}
		}
		err := c.Check()
		var ce *ConflictError
		switch {
		case want < 0 && err != nil:
			t.Fatalf("%v (%v): refused, no rule says so: %v", c, eff, err)
		case want < 0:
			works++
			for i, d := range Dims {
				if worksWith[d] == nil {
					worksWith[d] = map[string]bool{}
				}
				worksWith[d][ComboValues[d][idx[i]]] = true
			}
			return
		case err == nil:
			t.Fatalf("%v (%v): accepted, rule %d (%s × %s) refuses it", c, eff, want, Conflicts[want].A, Conflicts[want].B)
		case !errors.As(err, &ce):
			t.Fatalf("%v: refused without naming the two options: %v", c, err)
		case ce.Rule != want:
			t.Fatalf("%v (%v): refused by rule %d, want the first that applies, %d: %v", c, eff, ce.Rule, want, err)
		}
		r := Conflicts[want]
		msg := err.Error()
		if ce.A != r.A || ce.B != r.B || !strings.Contains(msg, string(r.A)+" ") || !strings.Contains(msg, " with "+string(r.B)+" ") || !strings.Contains(msg, r.Reason) {
			t.Fatalf("%v: %q does not name %s and %s with the rule's reason", c, msg, r.A, r.B)
		}
		perRule[want]++
	})
	if want := 4 * 3 * 4 * 4 * 2 * 2 * 2 * 4 * 2 * 2 * 2; total != want {
		t.Fatalf("%d cells, want %d", total, want)
	}
	for i, k := range perRule {
		if k == 0 {
			t.Errorf("rule %d (%s × %s) refuses no cell", i, Conflicts[i].A, Conflicts[i].B)
		}
	}
	for _, d := range Dims {
		for _, v := range ComboValues[d] {
			if !worksWith[d][v] {
				t.Errorf("%s %q works in no cell", d, v)
			}
		}
	}
	t.Logf("%d cells: %d work, %d refused (per rule %v)", total, works, total-works, perRule)
}

// TestConflictsArePairs: every rule names two different dimensions and
// values each of them takes, and no two rules cover the same pair of
// values.
func TestConflictsArePairs(t *testing.T) {
	seen := map[string]int{}
	for i, r := range Conflicts {
		if r.A == r.B || r.Reason == "" || len(r.AValues) == 0 || len(r.BValues) == 0 {
			t.Errorf("rule %d: %+v", i, r)
		}
		for _, a := range r.AValues {
			if !slices.Contains(Values[r.A], a) {
				t.Errorf("rule %d: %s has no value %q", i, r.A, a)
			}
			for _, b := range r.BValues {
				if !slices.Contains(Values[r.B], b) {
					t.Errorf("rule %d: %s has no value %q", i, r.B, b)
				}
				k := fmt.Sprintf("%s=%s %s=%s", r.A, a, r.B, b)
				if j, ok := seen[k]; ok {
					t.Errorf("rules %d and %d both refuse %s", j, i, k)
				}
				seen[k] = i
			}
		}
	}
}

// TestCompositionGuarantee: the guarantee of the cells that work follows
// their effective delivery and sharding: exactly-once is exact, sharding
// off reads a copy per worker, at-most-once counts its loss exactly
// unless share, coordinated reads or a per-worker take/skip; a DYNAMIC
// job's take/skip selects a window of the epoch's order.
func TestCompositionGuarantee(t *testing.T) {
	product(func(idx []int) {
		c := ComboAt(idx)
		if c.Check() != nil {
			return
		}
		eff, g := effective(c), c.Guarantee()
		ts := eff[DimTakeSkip]
		window := eff[DimSharding] == string(Dynamic) && (ts == ValTake || ts == ValSkip)
		subset := ts != ValNone && !window
		want := Guarantee{Copies: 1, Subset: subset, Window: window}
		switch {
		case eff[DimSharding] == string(Off):
			want.Copies = 0
		case eff[DimDelivery] == ExactlyOnce:
			want.Exact = true
		case eff[DimDelivery] == AtMostOnce && eff[DimShare] == ValOff && eff[DimCoordinated] == ValOff && !subset:
			want.LossCounted = true
		}
		if g != want {
			t.Fatalf("%v: guarantee %+v (%s), want %+v", c, g, g, want)
		}
		if g.Exact && g.Subset {
			t.Fatalf("%v: exactly-once with a per-worker take/skip works", c)
		}
	})
}

// TestConflictMessages: refusals name the options as the user gave them,
// and say which values were defaults.
func TestConflictMessages(t *testing.T) {
	for _, tc := range []struct {
		c    Combo
		want string
	}{
		{Combo{Offload: "0.5", Sharding: Static}, "offload fraction=0.5 with sharding static: a local worker needs sharding dynamic"},
		{Combo{Offload: OffloadLocal}, "offload local with sharding off (the default)"},
		{Combo{Sharding: Dynamic, TakeSkip: ValPerWorker}, "take/skip per-worker with delivery exactly-once: exactly-once takes and skips over the epoch's order"},
		{Combo{Sharding: Dynamic, Delivery: AtMostOnce, Offload: OffloadLocal, TakeSkip: ValPerWorker}, "take/skip per-worker with offload local: a take or skip that counts per worker pipeline"},
		{Combo{Sharding: Dynamic, Delivery: AtMostOnce, Resume: true}, "resume on with delivery at-most-once"},
		{Combo{Sharding: Dynamic, Share: true, Resume: true}, "resume on with share on"},
		{Combo{Coordinated: true, Workers: AutoWorkers}, "workers auto with coordinated on"},
		{Combo{Order: ValDeterministic}, "order deterministic with sharding off: deterministic order needs sharding dynamic"},
		{Combo{Order: ValDeterministic, Sharding: Dynamic, Offload: OffloadLocal}, "order deterministic with offload local"},
	} {
		err := tc.c.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.c, err, tc.want)
		}
	}
	// A per-worker take's refusal says what in the spec made it one.
	n, err := Combo{Sharding: Dynamic}.Options("j").Normalize()
	if err != nil {
		t.Fatal(err)
	}
	err = n.CheckSpec(SpecFeatures{Take: true, PerWorker: "op 1 (filter) comes before a take"})
	if err == nil || !strings.Contains(err.Error(), "(here: op 1 (filter) comes before a take)") {
		t.Errorf("per-worker take under exactly-once: %v", err)
	}
	// Takes and skips the nodes apply to the epoch's order compose with
	// exactly-once and with a local worker.
	for _, c := range []Combo{{Sharding: Dynamic, TakeSkip: ValTake}, {Sharding: Dynamic, TakeSkip: ValSkip, Offload: "0.5"},
		{Sharding: Dynamic, Delivery: AtMostOnce, TakeSkip: ValTake, Offload: OffloadLocal}} {
		if err := c.Check(); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
}

// TestCheckSpecRepeat: a repeat op is refused under sharding dynamic
// (whatever else: exactly-once, at-most-once, coordinated, share, local
// offload), with a RepeatError naming epochs, and allowed under off and
// static.
func TestCheckSpecRepeat(t *testing.T) {
	for _, c := range []Combo{
		{Sharding: Dynamic}, {Sharding: Dynamic, Delivery: AtMostOnce}, {Sharding: Dynamic, Epochs: 3},
		{Sharding: Dynamic, Share: true}, {Sharding: Dynamic, Offload: OffloadLocal}, {Coordinated: true},
	} {
		n, err := c.Options("r").Normalize()
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		err = n.CheckSpec(SpecFeatures{Repeat: true})
		var re *RepeatError
		if !errors.As(err, &re) || re.Epochs != n.Job().Epochs() || !strings.Contains(err.Error(), "epochs") {
			t.Errorf("%s with repeat: %v, want a RepeatError naming epochs", c, err)
		}
		if err := n.CheckSpec(SpecFeatures{}); err != nil {
			t.Errorf("%s without repeat: %v", c, err)
		}
	}
	for _, s := range []Sharding{Off, Static} {
		n, err := Combo{Sharding: s}.Options("r").Normalize()
		if err != nil {
			t.Fatal(err)
		}
		if err := n.CheckSpec(SpecFeatures{Repeat: true}); err != nil {
			t.Errorf("sharding %s with repeat: %v, want it allowed", s, err)
		}
	}
}
