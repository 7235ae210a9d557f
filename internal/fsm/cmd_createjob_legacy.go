package fsm

// CreateJob's older forms: v6 without an owner for a cluster below
// ProtocolOwners (DropOwner; protocol.go's DowngradeCreateJob goes further
// back), the legacy encodings v1..v5 that the compat log and tests replay,
// and their upgrade to v6.

// DropOwner rewrites a CreateJob v7 or later as the v6 that creates the
// same job without an owner (the default tenant's), for a cluster below
// protocol level ProtocolOwners. Anything else is returned as it is, with
// false.
func DropOwner(c Command) (Command, bool) {
	if c.Type != TypeCreateJob || c.Version < createJobOwnerV7 {
		return c, false
	}
	var b createJobBodyV6
	if decodeBody(c, &b) != nil || b.Options.Schema() != 1 {
		return c, false
	}
	b.Owner = nil
	d := newCommand(TypeCreateJob, createJobV6, b)
	d.At = c.At
	return d, true
}

// LegacyCreateJob is CreateJob in the version before v6 that carries o
// (v1..v5, the options in their legacy form), as older nodes proposed it:
// what older logs hold. The state machine applies it as it always has.
// Tests use it to write a job's options in the state machine's own terms
// (Sharding as splits.Policy, at-most-once as "", CountLoss among them);
// the nodes propose NewCreateJob. See NewCreateJob for the semantics.
func LegacyCreateJob(name, fingerprint string, o JobOptions, staticWorkers []string) Command {
	return LegacyCreateJobAt(name, fingerprint, o, staticWorkers, nil)
}

// LegacyCreateJobAt is LegacyCreateJob with a scale start (v3 or later;
// see Create.Scale).
func LegacyCreateJobAt(name, fingerprint string, o JobOptions, staticWorkers []string, start *ScaleStart) Command {
	v := createJobVersion(o)
	if start != nil {
		v = max(v, 3)
	}
	return newCommand(TypeCreateJob, v, createJobBody{Name: name, Fingerprint: fingerprint, Options: o, StaticWorkers: staticWorkers, Scale: start})
}

// LegacyResumeJob is NewResumeJob in the legacy form (LegacyCreateJob).
func LegacyResumeJob(name, fingerprint string, o JobOptions, r ResumeBody) Command {
	return newCommand(TypeCreateJob, createJobVersion(o), createJobBody{Name: name, Fingerprint: fingerprint, Options: o, Resume: &r})
}

// UpgradeCreateJob rewrites a CreateJob v1..v5 as the v6 command that
// creates the same job, with the same stamp: for the tests that run a
// recorded scenario both ways, and for tools that rewrite an old log.
// Only a command whose legacy options are valid upgrades (an invalid one
// has no v6 form: the state machine refuses it either way); anything else
// is returned as it is, with false.
func UpgradeCreateJob(c Command) (Command, bool) {
	if c.Type != TypeCreateJob || c.Version >= createJobV6 {
		return c, false
	}
	var b createJobBody
	if decodeBody(c, &b) != nil {
		return c, false
	}
	o := b.Options.Normalized()
	if o.validate() != nil {
		return c, false
	}
	job, err := o.stored()
	if err != nil {
		return c, false
	}
	n := Create{Name: b.Name, Fingerprint: b.Fingerprint, Options: job, CountLoss: o.CountLoss, StaticWorkers: b.StaticWorkers, Scale: b.Scale}
	u := NewCreateJob(n)
	if b.Resume != nil {
		u = NewResumeJob(n, *b.Resume)
	}
	u.At = c.At
	return u, true
}

// createJobVersion is the least legacy version that carries o: 5 with
// CountLoss (key 17), 4 with an offload boundary (options key 16, which a
// version-3 node would drop), 2 with Autoscale (key 12), else 1: a log
// that uses no new option stays readable by older nodes.
func createJobVersion(o JobOptions) uint16 {
	switch {
	case o.CountLoss:
		return 5
	case o.OffloadBoundary > 0:
		return 4
	case o.Autoscale:
		return 2
	}
	return 1
}
