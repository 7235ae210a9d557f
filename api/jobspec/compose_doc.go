package jobspec

import (
	"fmt"
	"slices"
	"strings"
)

// CompositionMarkdown is docs/jobs/composition.md's generated part: the
// refusals (Conflicts) and the guarantee of the combinations that work,
// over the full product of ComboValues, with its counts.
func CompositionMarkdown() string {
	var b strings.Builder
	total, works := 0, 0
	type key struct{ sharding, delivery, share, coordinated, takeSkip string }
	guarantees := map[key]string{}
	var keys []key
	forEachCombo(func(c Combo) {
		total++
		if c.Check() != nil {
			return
		}
		works++
		n, _ := c.Options("composition").Normalize()
		j := n.job.o
		k := key{string(j.Sharding), j.Delivery, ValOff, ValOff, ValNone}
		if k.delivery == "" {
			k.delivery = ValNone
		}
		if j.Share {
			k.share = ValOn
		}
		if j.Coordinated {
			k.coordinated = ValOn
		}
		switch c.TakeSkip {
		case ValTake, ValSkip:
			k.takeSkip = "take or skip"
		case ValPerWorker:
			k.takeSkip = ValPerWorker
		}
		g := GuaranteeOf(n, c.Spec()).String()
		if old, ok := guarantees[k]; ok && old != g {
			g = old + " / " + g // not expected: the table test would say
		}
		if _, ok := guarantees[k]; !ok {
			keys = append(keys, k)
		}
		guarantees[k] = g
	})
	fmt.Fprintf(&b, "Over the full product of the values below (%d combinations), %d work and %d are refused.\n\n", total, works, total-works)
	b.WriteString("| dimension | values tested |\n|---|---|\n")
	for _, d := range Dims {
		vs := make([]string, len(ComboValues[d]))
		for i, v := range ComboValues[d] {
			if v == "" {
				v = "(default)"
			}
			vs[i] = "`" + v + "`"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", d, strings.Join(vs, ", "))
	}
	b.WriteString("\n### Refused: the conflicting pairs\n\n")
	b.WriteString("Checked in this order; a combination is refused by the first pair it has, after the defaults are filled in.\n\n")
	b.WriteString("| # | option | value | conflicts with | value | why |\n|---|---|---|---|---|---|\n")
	for i, r := range Conflicts {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", i+1, r.A, code(r.AValues), r.B, code(r.BValues), r.Reason)
	}
	b.WriteString("\n### What works guarantees\n\n")
	b.WriteString("Per epoch, whatever worker dies; every other dimension (offload, workers, autocache, epochs, resume) leaves the guarantee as it is.\n\n")
	b.WriteString("| sharding | delivery | share | coordinated | take/skip | guarantee |\n|---|---|---|---|---|---|\n")
	slices.SortFunc(keys, func(x, y key) int {
		return strings.Compare(fmt.Sprint(x), fmt.Sprint(y))
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", k.sharding, k.delivery, k.share, k.coordinated, k.takeSkip, guarantees[k])
	}
	return b.String()
}

// code is values as the table shows them.
func code(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = "`" + v + "`"
	}
	return strings.Join(out, ", ")
}

// forEachCombo calls f with every combination of ComboValues, in Dims'
// order (the last dimension fastest).
func forEachCombo(f func(Combo)) {
	idx := make([]int, len(Dims))
	for {
		f(ComboAt(idx))
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
