package diagnose

import "github.com/feedmesh/feedmesh/pipeline"

// Observed is what a run saw of its source, for EpochSourceElements.
type Observed struct {
	// SourceElements and SourceBytes are the source's output in the run.
	SourceElements, SourceBytes int64
	// Ended says the run read the pipeline to its end.
	Ended bool
	// FileBytes is the total size of a files source's splits (0 if not known).
	FileBytes int64
}

// EpochSourceElements says how many elements the source yields in one
// epoch, and whether that is an estimate: counted from the spec for range
// and synthetic sources; for files, the source's count when the run read
// one whole epoch (it ended, with no take or repeat in the way), else the
// files' size divided by the bytes per element read so far. 0 when
// unknown.
func EpochSourceElements(spec *pipeline.Spec, o Observed) (n int64, estimated bool) {
	switch s := spec.Source; {
	case s.Range != nil:
		step := s.Range.Step
		if step == 0 {
			step = 1
		}
		span := s.Range.Stop - s.Range.Start
		if (span > 0) != (step > 0) || span == 0 {
			return 0, false
		}
		return (span + step - 1*sign(step)) / step, false
	case s.Synthetic != nil:
		return s.Synthetic.Count, false
	}
	whole := o.Ended
	for _, op := range spec.Ops {
		if op.Take != nil || op.Repeat != nil {
			whole = false
		}
	}
	if whole {
		return o.SourceElements, false
	}
	if o.FileBytes > 0 && o.SourceElements > 0 && o.SourceBytes > 0 {
		return max(1, int64(float64(o.FileBytes)/(float64(o.SourceBytes)/float64(o.SourceElements)))), true
	}
	return 0, false
}

func sign(x int64) int64 {
	if x < 0 {
		return -1
	}
	return 1
}
