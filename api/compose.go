package api

import (
	"strings"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/pipeline"
)

// SpecFeatures is what of spec the composition rules look at
// (jobspec.Normalized.CheckSpec): its autocache, take, skip and repeat
// ops, and whether the nodes can apply the take and skip to the epoch's
// order (pipeline.FoldTakeSkip). The
// client checks them at Distribute, the node again when it takes the
// request.
func SpecFeatures(spec *pipeline.Spec) jobspec.SpecFeatures {
	var f jobspec.SpecFeatures
	for _, op := range spec.Ops {
		f.Autocache = f.Autocache || op.Autocache != nil
		f.Take = f.Take || op.Take != nil
		f.Skip = f.Skip || op.Skip != nil
		f.Repeat = f.Repeat || op.Repeat != nil
	}
	if _, _, err := spec.FoldTakeSkip(); err != nil {
		f.PerWorker = strings.TrimPrefix(err.Error(), pipeline.ErrTakeSkipPerWorker.Error()+": ")
	}
	f.Deterministic = spec.Deterministic()
	return f
}
