package pipeline

// Batched reports whether the spec's output elements are batches (one of
// its ops batches), so that consumers count rows by the leading dimension.
func (s *Spec) Batched() bool {
	for i := range s.Ops {
		if s.Ops[i].batches() {
			return true
		}
	}
	return false
}
