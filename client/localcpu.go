package client

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The local CPU budget's default (JobOptions.LocalCPUs = 0): the CPUs the
// trainer's host has spare, measured from /proc/stat over
// spareSampleInterval as the CPUs times the fraction of that time they
// were idle (idle + iowait over all states). The training process's own
// use counts as busy: what the loop already burns is not spare. Where
// /proc/stat cannot be read, half of runtime.NumCPU is assumed, and the
// source says so.

const spareSampleInterval = 200 * time.Millisecond

// cpuTimes are the summed jiffies of /proc/stat's "cpu" line.
type cpuTimes struct{ idle, total uint64 }

// spareOf is the spare-CPU rule (pure): ncpu times the idle share of the
// interval between a and b.
func spareOf(a, b cpuTimes, ncpu int) float64 {
	if b.total <= a.total || b.idle < a.idle {
		return 0
	}
	return float64(ncpu) * float64(b.idle-a.idle) / float64(b.total-a.total)
}

// spareCPUs measures the spare CPUs, and says how.
func spareCPUs() (float64, string) {
	a, err := readCPUTimes()
	if err == nil {
		time.Sleep(spareSampleInterval) // a measurement interval, not a wait for a condition
		var b cpuTimes
		if b, err = readCPUTimes(); err == nil {
			s := spareOf(a, b, runtime.NumCPU())
			return s, fmt.Sprintf("spare CPUs measured: %d CPUs × idle %.0f %% over %v of /proc/stat", runtime.NumCPU(), 100*s/float64(runtime.NumCPU()), spareSampleInterval)
		}
	}
	return float64(runtime.NumCPU()) / 2, fmt.Sprintf("half of the %d CPUs (no /proc/stat: %v)", runtime.NumCPU(), err)
}

func readCPUTimes() (cpuTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTimes{}, fmt.Errorf("/proc/stat: empty")
	}
	return parseCPULine(sc.Text())
}

// parseCPULine reads /proc/stat's first line: "cpu user nice system idle
// iowait irq softirq steal ...".
func parseCPULine(line string) (cpuTimes, error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: first line %q is not the cpu line", line)
	}
	var t cpuTimes
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %q: %w", s, err)
		}
		t.total += v
		if i == 3 || i == 4 { // idle, iowait
			t.idle += v
		}
	}
	return t, nil
}
