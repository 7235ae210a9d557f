package transportbench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"
)

// Row is one (path, transport/variant, batch size) result: medians over the
// successful runs. MB are 10^6 bytes, GB 10^9 bytes.
type Row struct {
	Path       string `json:"path"`
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
		var mbps, bps, rcpu, scpu, ratio, cpuRatio []float64
		for run, s := range samples[i] {
			if s == nil {
				continue
			}
			mbps = append(mbps, s.mbps)
			bps = append(bps, s.batchesPerS)
			rcpu = append(rcpu, s.recvCPUPerGB)
			scpu = append(scpu, s.sendCPUPerGB)
			if ref >= 0 && run < len(samples[ref]) && samples[ref][run] != nil {
				g := samples[ref][run]
				ratio = append(ratio, s.mbps/g.mbps)
				cpuRatio = append(cpuRatio, s.recvCPUPerGB/g.recvCPUPerGB)
			}
			r.SamplesMBPerS = append(r.SamplesMBPerS, round(s.mbps, 1))
		}
		r.Runs = len(mbps)
		r.MBPerS = round(medianOf(mbps), 1)
		r.BatchesPerS = round(medianOf(bps), 1)
		r.RecvCPUSPerGB = round(medianOf(rcpu), 3)
		r.SendCPUSPerGB = round(medianOf(scpu), 3)
		if len(ratio) > 0 {
			v, w := round(medianOf(ratio), 3), round(medianOf(cpuRatio), 3)
			r.RatioVsGRPCTLS, r.RecvCPURatioVsGRPCTLS = &v, &w
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

// WriteTable prints rows as an aligned table.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PATH\tBATCH\tTRANSPORT\tMB/s\tBATCHES/s\tRECV CPU-s/GB\tSEND CPU-s/GB\t× GRPC-TLS\tRECV CPU × GRPC-TLS\tRUNS\t")
	for _, r := range rows {
		name := r.Transport
		if r.Variant != "default" {
			name += "/" + r.Variant
		}
		runs := fmt.Sprint(r.Runs)
		if len(r.Errors) > 0 {
			runs += fmt.Sprintf(" (%d failed)", len(r.Errors))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t%s\t%s\t%s\t\n", r.Path, sizeName(r.BatchBytes), name,
			r.MBPerS, r.BatchesPerS, r.RecvCPUSPerGB, r.SendCPUSPerGB, ratioText(r.RatioVsGRPCTLS), ratioText(r.RecvCPURatioVsGRPCTLS), runs)
	}
	return tw.Flush()
}

func ratioText(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f×", *v)
}
