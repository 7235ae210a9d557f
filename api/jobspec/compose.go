package jobspec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The composition of a job's features (docs/jobs/composition.md): every
// combination of sharding × delivery × offload × workers × share ×
// coordinated × autocache × take/skip × epochs × resume either works, with
// the guarantee Guarantee states, or is refused before anything is sent,
// by the first rule of Conflicts that it meets, with a message naming the
// two options that conflict. Normalize checks the rules between options;
// Normalized.CheckSpec those between an option and the spec (autocache,
// take/skip), which the client checks at Distribute and the node again
// when it takes the request.

// Dim is one dimension of the composition table: an option, or a feature
// of the spec.
type Dim string

// The dimensions, in the table's order.
const (
	DimSharding    Dim = "sharding"
	DimDelivery    Dim = "delivery"
	DimOffload     Dim = "offload"
	DimWorkers     Dim = "workers"
	DimShare       Dim = "share"
	DimCoordinated Dim = "coordinated"
	DimAutocache   Dim = "autocache"
	DimTakeSkip    Dim = "take/skip"
	DimEpochs      Dim = "epochs"
	DimResume      Dim = "resume"
	DimOrder       Dim = "order"
)

// Dims is every dimension, in the table's order.
var Dims = []Dim{DimSharding, DimDelivery, DimOffload, DimWorkers, DimShare, DimCoordinated, DimAutocache, DimTakeSkip, DimEpochs, DimResume, DimOrder}

// specDim reports a dimension that is the spec's, not an option.
func specDim(d Dim) bool { return d == DimAutocache || d == DimTakeSkip || d == DimOrder }

// The values a dimension takes in the table, after the defaults are filled
// (Combo.Effective): a class of values where the options allow more (a
// fixed worker count is "n", a local fraction "fraction", more than one
// epoch ">1").
const (
	ValNone     = "none"     // delivery of an OFF or STATIC job; take/skip absent
	ValOn       = "on"       // share, coordinated, autocache, resume
	ValOff      = "off"      // share, coordinated, autocache, resume; sharding off
	ValCount    = "n"        // workers: a fixed count
	ValFraction = "fraction" // offload: a fixed local fraction
	ValTake     = "take"     // take/skip: a take the nodes apply to the epoch's order
	ValSkip     = "skip"     // take/skip: a skip the nodes apply to the epoch's order
	// ValPerWorker is a take or skip the nodes cannot apply to the
	// epoch's order (SpecFeatures.PerWorker says why): each worker
	// pipeline would count its own.
	ValPerWorker = "per-worker"
	ValOneEpoch  = "1"
	ValEpochs    = ">1"
	// The spec's order (pipeline.Spec.Order; docs/jobs/deterministic-order.md).
	ValAny           = "any"
	ValDeterministic = "deterministic"
)

// Values is the values each dimension takes in the table (its effective
// values), in the table's order.
var Values = map[Dim][]string{
	DimSharding:    {string(Off), string(Dynamic), string(Static)},
	DimDelivery:    {ValNone, ExactlyOnce, AtMostOnce},
	DimOffload:     {OffloadAuto, OffloadRemote, OffloadLocal, ValFraction},
	DimWorkers:     {string(AutoWorkers), string(AllWorkers), ValCount},
	DimShare:       {ValOff, ValOn},
	DimCoordinated: {ValOff, ValOn},
	DimAutocache:   {ValOff, ValOn},
	DimTakeSkip:    {ValNone, ValTake, ValSkip, ValPerWorker},
	DimEpochs:      {ValOneEpoch, ValEpochs},
	DimResume:      {ValOff, ValOn},
	DimOrder:       {ValAny, ValDeterministic},
}

// Conflict is one rule of the composition table: a job whose dimension A
// takes one of AValues while B takes one of BValues (effective values,
// Values) is refused, because Reason. Both dimensions are named in the
// refusal. The rules are pairwise: no cell is refused but by a pair.
type Conflict struct {
	A       Dim
	AValues []string
	B       Dim
	BValues []string
	Reason  string
}

// Conflicts is the composition table's rules, in the order they are
// checked: a cell that meets several is refused by the first. Rules that
// name what the user is most likely to have set come first.
var Conflicts = []Conflict{
	{DimShare, []string{ValOn}, DimSharding, []string{string(Static)},
		"ephemeral sharing works with sharding off or dynamic, not static (each static job fixes its own worker list)"},
	{DimCoordinated, []string{ValOn}, DimSharding, []string{string(Off), string(Static)},
		"a coordinated job needs sharding dynamic (workers read disjoint splits)"},
	{DimCoordinated, []string{ValOn}, DimShare, []string{ValOn},
		"coordinated reads cannot be combined with share (each worker's rounds are its own job's)"},
	{DimDelivery, []string{ExactlyOnce, AtMostOnce}, DimSharding, []string{string(Off), string(Static)},
		"delivery is only for sharding dynamic (with sharding off or static each worker reads its own splits; see docs/jobs/sharding-and-delivery.md)"},
	{DimDelivery, []string{ExactlyOnce}, DimShare, []string{ValOn},
		"exactly-once is not yet with share (its sliding window skips batches by design): use delivery at-most-once, the default with share"},
	{DimWorkers, []string{string(AutoWorkers)}, DimSharding, []string{string(Off), string(Static)},
		"only DYNAMIC jobs autoscale (with sharding off each worker reads the whole dataset, so the count changes the data; with static the worker list is fixed at the job's start): take workers all or a fixed count"},
	{DimWorkers, []string{string(AutoWorkers)}, DimShare, []string{ValOn},
		"a sharing job does not autoscale (each worker produces for every sharing job): take workers all or a fixed count"},
	{DimWorkers, []string{string(AutoWorkers)}, DimCoordinated, []string{ValOn},
		"coordinated reads do not autoscale (every worker has its turn in the round rotation): take workers all or a fixed count"},
	{DimOffload, []string{OffloadLocal, ValFraction}, DimSharding, []string{string(Off), string(Static)},
		"a local worker needs sharding dynamic (it leases splits beside the nodes): use offload remote or auto"},
	{DimOffload, []string{OffloadLocal, ValFraction}, DimShare, []string{ValOn},
		"a local worker needs sharding dynamic without share (the nodes' production is shared, not leased): use offload remote or auto"},
	{DimOffload, []string{OffloadLocal, ValFraction}, DimCoordinated, []string{ValOn},
		"a local worker needs sharding dynamic without coordinated reads (a round comes from one node): use offload remote or auto"},
	{DimResume, []string{ValOn}, DimSharding, []string{string(Off), string(Static)},
		"only exactly-once DYNAMIC jobs resume from a checkpoint"},
	{DimResume, []string{ValOn}, DimShare, []string{ValOn},
		"only exactly-once DYNAMIC jobs resume from a checkpoint, and share is at-most-once"},
	{DimResume, []string{ValOn}, DimDelivery, []string{AtMostOnce},
		"only exactly-once DYNAMIC jobs resume from a checkpoint (an at-most-once job keeps no record of what its consumers returned)"},
	{DimTakeSkip, []string{ValPerWorker}, DimDelivery, []string{ExactlyOnce},
		"exactly-once takes and skips over the epoch's order (split order, then index in the split), which the nodes apply only to a range source with the take or skip before any op that changes the number of elements; this one would count per worker pipeline: move it there, take or skip in the trainer, or ask for delivery at-most-once"},
	{DimTakeSkip, []string{ValPerWorker}, DimOffload, []string{OffloadLocal, ValFraction},
		"a take or skip that counts per worker pipeline does not end with a local worker (not built): use offload remote or auto, or move the take or skip where the nodes apply it to the epoch's order (a range source, before any op that changes the number of elements)"},
	{DimOrder, []string{ValDeterministic}, DimSharding, []string{string(Off), string(Static)},
		"deterministic order needs sharding dynamic (its windows are leased first come, first served, and their content does not depend on who reads them; docs/jobs/deterministic-order.md)"},
	{DimOrder, []string{ValDeterministic}, DimShare, []string{ValOn},
		"deterministic order is not yet with share (a shared production orders batches by another rule)"},
	{DimOrder, []string{ValDeterministic}, DimCoordinated, []string{ValOn},
		"deterministic order is not yet with coordinated reads (rounds by bucket order batches by another rule)"},
	{DimOrder, []string{ValDeterministic}, DimDelivery, []string{AtMostOnce},
		"deterministic order needs delivery exactly-once (a dead worker's window is produced again, without what arrived, so the sequence has no hole)"},
	{DimOrder, []string{ValDeterministic}, DimOffload, []string{OffloadLocal, ValFraction},
		"deterministic order is not yet with a local worker: use offload remote or auto (which runs remote under deterministic order)"},
	{DimOrder, []string{ValDeterministic}, DimAutocache, []string{ValOn},
		"deterministic order reads windows block by block, which autocache does not cache yet: remove the autocache op"},
}

// Combo is one cell of the composition table as a user gives it: the
// options (zero values ask for the defaults, as in Options) and what of
// the spec the table looks at.
type Combo struct {
	Sharding    Sharding
	Delivery    string
	Offload     string // "", auto, remote, local or a fraction
	Workers     Workers
	Share       bool
	Coordinated bool
	Autocache   bool   // the spec has an autocache op
	TakeSkip    string // "", take or skip: the spec has that op
	Epochs      int64
	Resume      bool
	Order       string // "" (any) or deterministic: the spec's order
}

// Options is the cell's options, with the rest what a coordinated job
// needs (one consumer, index 0) and a stand-in checkpoint for Resume.
func (c Combo) Options(name string) Options {
	o := Options{Name: name, Sharding: c.Sharding, Delivery: c.Delivery, Offload: c.Offload, Workers: c.Workers,
		Share: c.Share, Coordinated: c.Coordinated, Epochs: c.Epochs}
	if c.Coordinated {
		o.NumConsumers = 1
	}
	if c.Resume {
		o.Resume = []byte{1}
	}
	return o
}

// Spec is the cell's spec features.
func (c Combo) Spec() SpecFeatures {
	f := SpecFeatures{Autocache: c.Autocache, Take: c.TakeSkip == ValTake || c.TakeSkip == ValPerWorker, Skip: c.TakeSkip == ValSkip}
	if c.TakeSkip == ValPerWorker {
		f.PerWorker = "a take after a batch"
	}
	f.Deterministic = c.Order == ValDeterministic
	return f
}

// SpecFeatures is what of a job's spec the composition rules look at.
type SpecFeatures struct {
	Autocache  bool // an autocache op
	Take, Skip bool // a take, a skip op
	// PerWorker says why the nodes cannot apply the take or skip to the
	// epoch's order (pipeline.FoldTakeSkip), "" if they can: run by each
	// worker pipeline, it would count per worker.
	PerWorker string
	// Repeat: a repeat op. Not a dimension of the table: it has one
	// rule, RepeatDynamicReason, that CheckSpec applies before the table.
	Repeat bool
	// Deterministic: the spec's order is deterministic.
	Deterministic bool
}

// takeSkip is the take/skip dimension's value of spec features f.
func (f SpecFeatures) takeSkip() string {
	switch {
	case (f.Take || f.Skip) && f.PerWorker != "":
		return ValPerWorker
	case f.Take:
		return ValTake
	case f.Skip:
		return ValSkip
	}
	return ValNone
}

// Cell is a combination's effective values (Values), one per dimension,
// and which of them were defaults (the user set nothing).
type Cell struct {
	Value   map[Dim]string
	Default map[Dim]bool
	shown   map[Dim]string // what a refusal shows, where it is not Value
}

// cellOf is the cell of normalized job options j, a consumer's offload
// mode (as ParseOffload names it) and resume, and spec features f;
// defaults says which dimensions the user left unset (nil: none).
func cellOf(j Options, offload string, resume bool, f SpecFeatures, defaults map[Dim]bool) Cell {
	onOff := func(b bool) string {
		if b {
			return ValOn
		}
		return ValOff
	}
	v := map[Dim]string{
		DimSharding:    string(j.Sharding),
		DimDelivery:    j.Delivery,
		DimOffload:     offload,
		DimWorkers:     string(j.Workers),
		DimShare:       onOff(j.Share),
		DimCoordinated: onOff(j.Coordinated),
		DimAutocache:   onOff(f.Autocache),
		DimTakeSkip:    ValNone,
		DimEpochs:      ValOneEpoch,
		DimResume:      onOff(resume),
		DimOrder:       ValAny,
	}
	if f.Deterministic {
		v[DimOrder] = ValDeterministic
	}
	if v[DimDelivery] == "" {
		v[DimDelivery] = ValNone
	}
	shown := map[Dim]string{}
	switch offload {
	case OffloadAuto, OffloadRemote, OffloadLocal:
	default:
		v[DimOffload], shown[DimOffload] = ValFraction, offload
	}
	if j.Workers.Count() > 0 {
		v[DimWorkers], shown[DimWorkers] = ValCount, string(j.Workers)
	}
	v[DimTakeSkip] = f.takeSkip()
	if j.Epochs != 1 {
		v[DimEpochs] = ValEpochs
	}
	return Cell{Value: v, Default: defaults, shown: shown}
}

// checkComposition refuses raw options o, whose job part normalizeJob
// made job, that meet a rule of Conflicts between two options. An
// unparsable offload is left to newConsumer.
func (o Options) checkComposition(job Options) error {
	mode, _, err := ParseOffload(o.Offload)
	if err != nil {
		return nil
	}
	defaults := map[Dim]bool{
		DimSharding: canonical(string(o.Sharding)) == "",
		DimDelivery: canonical(o.Delivery) == "",
		DimOffload:  canonical(o.Offload) == "",
		DimWorkers:  canonical(string(o.Workers)) == "" && o.MaxWorkers == 0 && !o.Autoscale,
		DimEpochs:   o.Epochs == 0,
	}
	return cellOf(job, mode, len(o.Resume) > 0, SpecFeatures{}, defaults).refusal(optionRule)
}

// meets reports whether the cell meets rule r.
func (cell Cell) meets(r Conflict) bool {
	return slices.Contains(r.AValues, cell.Value[r.A]) && slices.Contains(r.BValues, cell.Value[r.B])
}

// refusal is the error of the first rule the cell meets among those
// whose dimensions pass use, or nil.
func (cell Cell) refusal(use func(Conflict) bool) error {
	for i, r := range Conflicts {
		if use(r) && cell.meets(r) {
			return &ConflictError{Rule: i, A: r.A, AValue: cell.show(r.A), B: r.B, BValue: cell.show(r.B), Reason: r.Reason}
		}
	}
	return nil
}

// show is dimension d's value as a refusal names it: the option's value,
// and "(the default)" when the user did not set it.
func (cell Cell) show(d Dim) string {
	v := cell.Value[d]
	if s, ok := cell.shown[d]; ok {
		v = s
	}
	if cell.Default[d] {
		v += " (the default)"
	}
	return v
}

// ConflictError is a refusal of the composition table: options (or an
// option and the spec) that do not compose. Its message names both.
type ConflictError struct {
	Rule           int // the index in Conflicts
	A, B           Dim
	AValue, BValue string
	Reason         string
	// Detail is what in the spec made the cell's value, if the rule's
	// reason does not say (a take the nodes cannot apply: why).
	Detail string
}

func (e *ConflictError) Error() string {
	s := fmt.Sprintf("%s %s with %s %s: %s", e.A, e.AValue, e.B, e.BValue, e.Reason)
	if e.Detail != "" {
		s += " (here: " + e.Detail + ")"
	}
	return s
}

// optionRule reports a rule between two options (Normalize checks it).
func optionRule(r Conflict) bool { return !specDim(r.A) && !specDim(r.B) }

// CheckSpec checks the rules between n's options and what its spec has
// (f): the cell's refusal, naming the option and the op, or nil. The
// client calls it at Distribute, before anything is sent; the node again
// when it takes the request.
func (n Normalized) CheckSpec(f SpecFeatures) error {
	if f.Repeat && n.job.o.Sharding == Dynamic {
		return &RepeatError{Epochs: n.job.o.Epochs}
	}
	cell := cellOf(n.job.o, n.consumer.offload, n.consumer.resume != nil, f, nil)
	err := cell.refusal(func(r Conflict) bool { return !optionRule(r) })
	var ce *ConflictError
	if errors.As(err, &ce) && (ce.A == DimTakeSkip || ce.B == DimTakeSkip) {
		ce.Detail = f.PerWorker
	}
	return err
}

// RepeatDynamicReason is why a DYNAMIC job's spec may not repeat: its
// workers read splits a provider leases them (pipeline.SplitProvider),
// each split once per epoch of the job, so a repeat op re-opens a source
// that has nothing left: it read one pass, and the job used to end there
// with a plain end of data (feedmesh-bench vision's train-node asked for
// more images than the folder held and got "EOF"). The job's epochs are
// its passes; with sharding off or static each worker's pipeline reads a
// fixed list of splits and repeat repeats it.
const RepeatDynamicReason = "a dynamic job's workers lease each epoch's splits once, so a repeat in its spec would read one pass and end the job there: remove the repeat and ask for the passes with epochs (JobOptions.Epochs, read --epochs, Python epochs=), or use sharding off"

// RepeatError refuses a DYNAMIC job whose spec has a repeat op
// (RepeatDynamicReason).
type RepeatError struct {
	Epochs int64 // the job's
}

func (e *RepeatError) Error() string {
	return fmt.Sprintf("sharding dynamic with repeat in the spec (epochs %d): %s", e.Epochs, RepeatDynamicReason)
}

// Check is the composition table's verdict on a combination: nil if it
// works (Guarantee says what it guarantees), else the refusal naming the
// two options that conflict, as Normalize and CheckSpec give it.
func (c Combo) Check() error {
	n, err := c.Options("composition").Normalize()
	if err != nil {
		return err
	}
	return n.CheckSpec(c.Spec())
}

// ComboValues is the representative values of each dimension that the
// table is tested over (the full product) and the system test draws its
// rows from: raw options, defaults included ("").
var ComboValues = map[Dim][]string{
	DimSharding:    {"", string(Off), string(Dynamic), string(Static)},
	DimDelivery:    {"", ExactlyOnce, AtMostOnce},
	DimOffload:     {"", OffloadRemote, OffloadLocal, "0.5"},
	DimWorkers:     {"", string(AutoWorkers), string(AllWorkers), "2"},
	DimShare:       {ValOff, ValOn},
	DimCoordinated: {ValOff, ValOn},
	DimAutocache:   {ValOff, ValOn},
	DimTakeSkip:    {ValNone, ValTake, ValSkip, ValPerWorker},
	DimEpochs:      {"", "2"},
	DimResume:      {ValOff, ValOn},
	DimOrder:       {"", ValDeterministic},
}

// ComboAt is the combination that takes, in each dimension d of Dims,
// ComboValues[d][idx[i]].
func ComboAt(idx []int) Combo {
	v := func(i int) string { return ComboValues[Dims[i]][idx[i]] }
	c := Combo{
		Sharding:    Sharding(v(0)),
		Delivery:    v(1),
		Offload:     v(2),
		Workers:     Workers(v(3)),
		Share:       v(4) == ValOn,
		Coordinated: v(5) == ValOn,
		Autocache:   v(6) == ValOn,
		Epochs:      0,
		Resume:      v(9) == ValOn,
		Order:       v(10),
	}
	if t := v(7); t != ValNone {
		c.TakeSkip = t
	}
	if v(8) != "" {
		c.Epochs = 2
	}
	return c
}

// String names the combination's values that are not defaults.
func (c Combo) String() string {
	var p []string
	add := func(k, v string) {
		if v != "" {
			p = append(p, k+"="+v)
		}
	}
	add("sharding", string(c.Sharding))
	add("delivery", c.Delivery)
	add("offload", c.Offload)
	add("workers", string(c.Workers))
	if c.Share {
		add("share", ValOn)
	}
	if c.Coordinated {
		add("coordinated", ValOn)
	}
	if c.Autocache {
		add("autocache", ValOn)
	}
	add("take/skip", c.TakeSkip)
	if c.Epochs != 0 {
		add("epochs", fmt.Sprint(c.Epochs))
	}
	if c.Resume {
		add("resume", ValOn)
	}
	add("order", c.Order)
	if len(p) == 0 {
		return "defaults"
	}
	return strings.Join(p, " ")
}
