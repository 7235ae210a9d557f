package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/feedmesh/feedmesh/api/jobspec"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/cmd/internal/cli"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// jobFlags are `read`'s flags that give the job's options and this
// reader's choices in it: one per field of client.JobOptions
// (jobspec.Options), which TestJobFlagsSetEveryOption checks, but for
// Resume (--resume names the checkpoint's file: runRead reads it).
type jobFlags struct {
	job, sharding, delivery, workers, compression, offload *string
	order, skipBatches                                     *string
	epochs                                                 *int64
	seed                                                   *uint64
	reorderBatches                                         *int
	maxWorkers, consumers, index, offloadBoundary          *int
	scaleRevisit, scalePause                               *int
	autoscale, share, coordinated, padFinal                *bool
	scaleThreshold, localCPUs                              *float64
	consumerTTL, gcAfter                                   *time.Duration
}

// addJobFlags defines the job flags on fs.
func addJobFlags(fs *flag.FlagSet) *jobFlags {
	return &jobFlags{
		job:             fs.String("job", "", "job name; readers that name the same job share its data (required)"),
		delivery:        fs.String("delivery", "", "with --sharding dynamic: exactly-once (the default: a dead worker's splits are read again, skipping what was delivered) or at-most-once (they are lost; the default with --share)"),
		sharding:        fs.String("sharding", "dynamic", "dynamic (each element once, split among the workers), off (every worker reads the whole dataset: one copy per worker) or static"),
		epochs:          fs.Int64("epochs", 1, "passes over the dataset"),
		workers:         fs.String("workers", "", "how many nodes serve the job: all (every node; the default), a fixed count `N`, or auto (with --sharding dynamic, without --share or --coordinated: the cluster chooses from this reader's batch time and queue, starting at one worker and adding them while they help); see docs/jobs/autoscaling.md"),
		maxWorkers:      fs.Int("max-workers", 0, "with --workers auto: the most workers the cluster may give the job; alone: a fixed count, as --workers N (0: no cap)"),
		autoscale:       fs.Bool("autoscale", false, "the same as --workers auto (kept for older scripts)"),
		scaleThreshold:  fs.Float64("autoscale-threshold", 0, "with --workers auto: the relative batch-time gain a worker must bring to stay (0: Cachew's 0.03)"),
		scaleRevisit:    fs.Int("autoscale-revisit", 0, "with --workers auto: how many metrics (100 batches each) a converged worker count stands before one fewer is tried (0: Cachew's 10)"),
		scalePause:      fs.Int("autoscale-pause", 0, "with --workers auto: how many metrics are ignored after a change (0: Cachew's 2; -1: none)"),
		share:           fs.Bool("share", false, "ephemeral sharing: jobs of the same spec, sharding (off or dynamic) and epochs that all pass --share compute each batch once per worker; a job that lags more than the worker's share window behind skips batches instead of slowing the others"),
		coordinated:     fs.Bool("coordinated", false, "coordinated reads: the --consumers readers of the job get, in each round, batches of the same length bucket from one worker (spec must end in bucket_by_sequence_length; sharding becomes dynamic)"),
		consumers:       fs.Int("consumers", 0, "with --coordinated: how many consumers (trainer ranks) read the job in rounds"),
		index:           fs.Int("index", 0, "with --coordinated: this reader's consumer index in [0, --consumers)"),
		compression:     fs.String("compression", "none", "compress batches on the wire: none, lz4 (cheap to decompress) or zstd (smaller, costs the workers more CPU); for links slower than the workers"),
		offload:         fs.String("offload", "auto", "where a dynamic job's pipeline runs for this reader: auto (profile, then decide: all local when the reader does not stall, else a share of it), remote (the nodes only), local (this process only; the nodes take no split), or a local fraction such as 0.3 (see docs/jobs/offload.md)"),
		offloadBoundary: fs.Int("offload-boundary", 0, "partial offload: the nodes run the source and the spec's first N ops and ship single elements, this reader runs the rest (a dynamic exactly-once job; 0: no cut; cut points are 1 up to the first op that batches, and the ops after the cut must not be repeat, take, skip or autocache)"),
		localCPUs:       fs.Float64("local-cpus", 0, "CPU budget of this process's local worker, in cores (0: the spare CPUs measured)"),
		padFinal:        fs.Bool("pad-final-round", false, "with --coordinated: pad the final partial rounds out with empty batches instead of dropping them"),
		consumerTTL:     fs.Duration("consumer-ttl", 0, "a reader that misses heartbeats this long is dropped from the job (0: 30s)"),
		gcAfter:         fs.Duration("gc-after", 0, "the job is deleted once no reader has been attached this long (0: 1m)"),
		order:           fs.String("order", "", "any (the spec's order, or today's: it depends on which worker reads what) or deterministic (the same sequence of batches at any cluster size, through node deaths and resumes; with --sharding dynamic, exactly-once; range and synthetic sources, map and batch ops; see docs/jobs/deterministic-order.md); written into the spec"),
		seed:            fs.Uint64("seed", 0, "the spec's seed (with the epoch, it decides every shuffle of --order deterministic); 0: the spec's own"),
		skipBatches:     fs.String("skip-batches", "", "with --order deterministic: ranges `LO:HI[,LO:HI...]` of this reader's batch sequence over the run (its steps, numbered without skips) to pass over, e.g. 41000:41500; every other batch comes, in the same order; recorded in --checkpoint (a --resume without it keeps the checkpoint's)"),
		reorderBatches:  fs.Int("reorder-batches", 0, "with --order deterministic: the most batches this reader holds that arrived before their turn; more fails the read, naming this flag (0: 4096)"),
	}
}

// options are the job options the flags give, as given (the client
// normalizes them); an error names the flag.
func (f *jobFlags) options() (client.JobOptions, error) {
	if _, err := batch.ParseCompression(*f.compression); err != nil {
		return client.JobOptions{}, fmt.Errorf("--compression: %w", err)
	}
	sh, err := jobspec.ParseSharding(*f.sharding)
	if err != nil {
		return client.JobOptions{}, fmt.Errorf("--sharding: %w", err)
	}
	dl, err := jobspec.ParseDelivery(*f.delivery)
	if err != nil {
		return client.JobOptions{}, fmt.Errorf("--delivery: %w", err)
	}
	wk, err := jobspec.ParseWorkers(*f.workers)
	if err != nil {
		return client.JobOptions{}, cli.InputError(fmt.Errorf("--workers: %w", err))
	}
	skips, err := parseSkips(*f.skipBatches)
	if err != nil {
		return client.JobOptions{}, cli.InputError(fmt.Errorf("--skip-batches: %w", err))
	}
	return client.JobOptions{
		Name: *f.job, Sharding: sh, Epochs: *f.epochs, Workers: wk, MaxWorkers: *f.maxWorkers, Share: *f.share, Autoscale: *f.autoscale,
		Coordinated: *f.coordinated, NumConsumers: *f.consumers, ConsumerIndex: *f.index, PadFinalRound: *f.padFinal,
		Compression: *f.compression, Delivery: dl, Offload: *f.offload, LocalCPUs: *f.localCPUs, OffloadBoundary: *f.offloadBoundary,
		AutoscaleThreshold: *f.scaleThreshold, AutoscaleRevisit: *f.scaleRevisit, AutoscalePause: *f.scalePause,
		ConsumerTTL: *f.consumerTTL, GCAfter: *f.gcAfter,
		Order: *f.order, Seed: *f.seed, ReorderBatches: *f.reorderBatches, SkipBatches: skips,
	}, nil
}

// parseSkips parses --skip-batches: LO:HI ranges, comma-separated ("":
// none); JobOptions.Normalize checks and merges them.
func parseSkips(s string) ([][2]int64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out [][2]int64
	for _, part := range strings.Split(s, ",") {
		lo, hi, ok := strings.Cut(strings.TrimSpace(part), ":")
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q: want LO:HI (batches LO up to HI, excluded)", part)
		}
		out = append(out, [2]int64{a, b})
	}
	return out, nil
}
