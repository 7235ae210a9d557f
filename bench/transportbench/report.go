package transportbench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"text/tabwriter"
)

// Row is one (path, transport/variant, batch size) result: medians over the
// successful runs. MB are 10^6 bytes, GB 10^9 bytes.
//
// For the text workload BatchBytes is the mean padded batch (its frame as
// batch.Encode writes it, what the baselines ship), MB/s and CPU-s/GB count
// padded bytes delivered (for feedmesh: the padded size of the batches it
// delivered unpadded and re-padded), and WireBytesPerBatch is what each
// sender actually wrote per batch (feedmesh: unpadded frames, compressed in
// the compress=<name> variants). The key figure is BatchesRatioVsGRPCTLS.
// MB/s and CPU-s/GB never count wire bytes: a compressed variant delivers
// the same batches as the others.
type Row struct {
	Path string `json:"path"`
	// Rate is the veth path's rate limit the row was measured under
	// (Config.Rate, or one scripts/veth.sh set), empty when unshaped.
	Rate       string `json:"rate"`
	Workload   string `json:"workload"` // WorkloadRaw or WorkloadText
	Transport  string `json:"transport"`
	Variant    string `json:"variant"`
	BatchBytes int    `json:"batch_bytes"`
	Runs       int    `json:"runs"` // successful runs

	MBPerS        float64 `json:"mb_per_s"`
	BatchesPerS   float64 `json:"batches_per_s"`
	RecvCPUSPerGB float64 `json:"recv_cpu_s_per_gb"`
	SendCPUSPerGB float64 `json:"send_cpu_s_per_gb"`

	// RatioVsGRPCTLS is the median over runs of this run's MB/s divided by
	// grpc-tls's MB/s in the same run (null without the baseline).
	RatioVsGRPCTLS *float64 `json:"ratio_vs_grpc_tls"`
	// RecvCPURatioVsGRPCTLS is the same for receiver CPU-s per GB.
	RecvCPURatioVsGRPCTLS *float64 `json:"recv_cpu_ratio_vs_grpc_tls"`
	// BatchesRatioVsGRPCTLS is the same for batches/s (for raw rows it
	// equals RatioVsGRPCTLS up to rounding; for text rows it is the one to
	// quote).
	BatchesRatioVsGRPCTLS *float64 `json:"batches_ratio_vs_grpc_tls"`

	// WireBytesPerBatch is the median over runs of the mean bytes the
	// sender wrote per batch, above the transport's own framing (feedmesh:
	// batch frames as sent — length prefix, header and tail, after
	// unpadding and compression; baselines and quic-raw: the batch or
	// padded record). 0 when no run succeeded.
	WireBytesPerBatch float64 `json:"wire_bytes_per_batch"`

	SamplesMBPerS []float64 `json:"samples_mb_per_s"`
	Errors        []string  `json:"errors,omitempty"`
}

// summarize turns samples[case][run] into rows, pairing each run with the
// grpc-tls measurement of the same run for the ratios.
func summarize(path string, size int, cases []benchCase, samples [][]*sample, errs [][]string) []Row {
	ref := -1
	for i, c := range cases {
		if c.transport == GRPCTLS && c.variant == "default" {
			ref = i
		}
	}
	rows := make([]Row, 0, len(cases))
	for i, c := range cases {
		r := Row{Path: path, Transport: c.transport, Variant: c.variant, BatchBytes: size, Errors: errs[i]}
		var mbps, bps, rcpu, scpu, wire, ratio, cpuRatio, bRatio []float64
		for run, s := range samples[i] {
			if s == nil {
				continue
			}
			mbps = append(mbps, s.mbps)
			bps = append(bps, s.batchesPerS)
			rcpu = append(rcpu, s.recvCPUPerGB)
			scpu = append(scpu, s.sendCPUPerGB)
			wire = append(wire, s.wirePerBatch)
			if ref >= 0 && run < len(samples[ref]) && samples[ref][run] != nil {
				g := samples[ref][run]
				ratio = append(ratio, s.mbps/g.mbps)
				cpuRatio = append(cpuRatio, s.recvCPUPerGB/g.recvCPUPerGB)
				bRatio = append(bRatio, s.batchesPerS/g.batchesPerS)
			}
			r.SamplesMBPerS = append(r.SamplesMBPerS, round(s.mbps, 1))
		}
		r.Runs = len(mbps)
		r.MBPerS = round(medianOf(mbps), 1)
		r.BatchesPerS = round(medianOf(bps), 1)
		r.RecvCPUSPerGB = round(medianOf(rcpu), 3)
		r.SendCPUSPerGB = round(medianOf(scpu), 3)
		r.WireBytesPerBatch = round(medianOf(wire), 0)
		if len(ratio) > 0 {
			v, w, b := round(medianOf(ratio), 3), round(medianOf(cpuRatio), 3), round(medianOf(bRatio), 3)
			r.RatioVsGRPCTLS, r.RecvCPURatioVsGRPCTLS, r.BatchesRatioVsGRPCTLS = &v, &w, &b
		}
		rows = append(rows, r)
	}
	return rows
}

// medianOf returns the median (0 for none).
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// sizeName prints a batch size the way the issue does: 64KiB, 1MiB, 16MiB.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// WriteTable prints rows as an aligned table (text rows in their own table,
// led by batches/s and the wire bytes per batch).
func WriteTable(w io.Writer, rows []Row) error {
	var raw, text []Row
	for _, r := range rows {
		if r.Workload == WorkloadText {
			text = append(text, r)
		} else {
			raw = append(raw, r)
		}
	}
	// The rate limit heads the table (one per run; rows of several runs may
	// differ, each is named).
	var rates []string
	for _, r := range rows {
		if r.Rate != "" && !slices.Contains(rates, r.Rate) {
			rates = append(rates, r.Rate)
		}
	}
	for _, rate := range rates {
		if _, err := fmt.Fprintf(w, "veth rate limit %s: the sender's egress shaped by tc tbf (PATH %s@%s below)\n", rate, Veth, rate); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	if len(raw) > 0 || len(text) == 0 {
		fmt.Fprintln(tw, "PATH\tBATCH\tTRANSPORT\tMB/s\tBATCHES/s\tWIRE B/BATCH\tRECV CPU-s/GB\tSEND CPU-s/GB\t× GRPC-TLS\tRECV CPU × GRPC-TLS\tRUNS\t")
		for _, r := range raw {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f\t%.0f\t%.2f\t%.2f\t%s\t%s\t%s\t\n", pathText(r), sizeName(r.BatchBytes), rowName(r),
				r.MBPerS, r.BatchesPerS, r.WireBytesPerBatch, r.RecvCPUSPerGB, r.SendCPUSPerGB, ratioText(r.RatioVsGRPCTLS), ratioText(r.RecvCPURatioVsGRPCTLS), runsText(r))
		}
	}
	if len(text) > 0 {
		if len(raw) > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, "PATH\tWORKLOAD\tTRANSPORT\tBATCHES/s\tBATCHES × GRPC-TLS\tWIRE B/BATCH\tPADDED B/BATCH\tPADDED MB/s\tRECV CPU-s/GB\tSEND CPU-s/GB\tRECV CPU × GRPC-TLS\tRUNS\t")
		for _, r := range text {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%.0f\t%d\t%.1f\t%.2f\t%.2f\t%s\t%s\t\n", pathText(r), r.Workload, rowName(r),
				r.BatchesPerS, ratioText(r.BatchesRatioVsGRPCTLS), r.WireBytesPerBatch, r.BatchBytes, r.MBPerS,
				r.RecvCPUSPerGB, r.SendCPUSPerGB, ratioText(r.RecvCPURatioVsGRPCTLS), runsText(r))
		}
	}
	return tw.Flush()
}

// pathText is the path column: the path, with its rate limit if any.
func pathText(r Row) string {
	if r.Rate != "" {
		return r.Path + "@" + r.Rate
	}
	return r.Path
}

func rowName(r Row) string {
	if r.Variant != "default" {
		return r.Transport + "/" + r.Variant
	}
	return r.Transport
}

func runsText(r Row) string {
	s := fmt.Sprint(r.Runs)
	if len(r.Errors) > 0 {
		s += fmt.Sprintf(" (%d failed)", len(r.Errors))
	}
	return s
}

func ratioText(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f×", *v)
}
