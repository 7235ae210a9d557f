package jobspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Sharding says how a job's data is divided among its workers: tf.data
// service's ShardingPolicy OFF and DYNAMIC, and a STATIC that assigns split
// i to worker i mod n. The zero value asks for the job's default: Off, or
// Dynamic for a coordinated job.
type Sharding string

// The sharding policies.
const (
	Off     Sharding = "off"
	Dynamic Sharding = "dynamic"
	Static  Sharding = "static"
)

// ParseSharding parses a sharding name as the CLI takes it
// (case-insensitive; "" is the default).
func ParseSharding(s string) (Sharding, error) {
	sh := Sharding(canonical(s))
	switch sh {
	case "", Off, Dynamic, Static:
		return sh, nil
	}
	return "", fmt.Errorf("sharding %q: want off, dynamic or static", s)
}

// Delivery guarantees (Options.Delivery).
const (
	ExactlyOnce = "exactly-once"
	AtMostOnce  = "at-most-once"
)

// ParseDelivery parses a delivery name as the CLI takes it ("" is the
// default).
func ParseDelivery(s string) (string, error) {
	d := canonical(s)
	switch d {
	case "", ExactlyOnce, AtMostOnce:
		return d, nil
	}
	return "", fmt.Errorf("delivery %q: want exactly-once or at-most-once", s)
}

// Workers says how many nodes serve a job (Options.Workers): AllWorkers
// (every live node), a fixed count (FixedWorkers(n), "n" on the wire), or
// AutoWorkers (the cluster chooses from the consumers' batch time, after
// Cachew; DYNAMIC jobs without Share or Coordinated). The zero value asks
// for the default, AllWorkers; a job that sets only MaxWorkers n (as
// before Workers existed) gets n, and one that sets only Autoscale gets
// auto.
type Workers string

// The worker choices that are not a count.
const (
	AutoWorkers Workers = "auto"
	AllWorkers  Workers = "all"
)

// FixedWorkers is a fixed count of n workers.
func FixedWorkers(n int) Workers { return Workers(strconv.Itoa(n)) }

// ParseWorkers parses a worker choice as the CLI and the Python client take
// it: "auto", "all" or a count >= 1 (case-insensitive; "" is the default).
func ParseWorkers(s string) (Workers, error) {
	w := Workers(canonical(s))
	if _, _, err := w.count(); err != nil {
		return "", err
	}
	return w, nil
}

// count returns the fixed count (n >= 1) or, for "", auto and all, 0, and
// whether the choice is a count.
func (w Workers) count() (int, bool, error) {
	switch w {
	case "", AutoWorkers, AllWorkers:
		return 0, false, nil
	}
	n, err := strconv.Atoi(string(w))
	if err != nil || n < 1 {
		return 0, false, fmt.Errorf("workers %q: want auto (the cluster chooses), all (every node) or a count >= 1", string(w))
	}
	return n, true, nil
}

// Count is the fixed count of workers, or 0 for auto, all and the default.
func (w Workers) Count() int {
	n, _, _ := w.count()
	return n
}

// UnmarshalJSON takes a string ("auto", "all", "4") or a number (4), so
// that the Python client's workers=4 and workers="all" both decode.
func (w *Workers) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '"' {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("workers %s: want \"auto\", \"all\" or a count >= 1", b)
		}
		*w = FixedWorkers(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*w = Workers(s)
	return nil
}

// Offload (Options.Offload) says where a DYNAMIC job's pipeline runs for
// a consumer: on the mesh's nodes, in the consumer's own process (a local
// worker that leases splits beside the nodes), or both. It is the
// consumer's choice, not the job's (Consumer.Offload). The client does
// the work; the cluster only keeps the local worker's leases
// (api.MethodOffload) and, while a consumer's host prepares everything,
// keeps the nodes off the job.
const (
	// OffloadAuto profiles the pipeline and the training loop on the
	// trainer's host, then decides (FastFlow's policy, client/offload).
	OffloadAuto = "auto"
	// OffloadRemote: the nodes prepare everything (no local worker).
	OffloadRemote = "remote"
	// OffloadLocal: the local worker prepares everything; the nodes
	// take no split of the job.
	OffloadLocal = "local"
)

// MaxLocalFraction is ParseOffload's largest fraction other than local.
const MaxLocalFraction = 1.0

// ParseOffload parses an offload mode: auto, remote, local, or a fixed
// local fraction in [0, 1] ("0.3" or "fraction=0.3"). The empty string is
// auto. fraction is the local share a fixed mode means (remote 0, local
// 1); auto reports -1.
func ParseOffload(s string) (mode string, fraction float64, err error) {
	v := canonical(s)
	switch v {
	case "", OffloadAuto:
		return OffloadAuto, -1, nil
	case OffloadRemote:
		return OffloadRemote, 0, nil
	case OffloadLocal:
		return OffloadLocal, 1, nil
	}
	f, perr := strconv.ParseFloat(strings.TrimPrefix(v, "fraction="), 64)
	if perr != nil || !(f >= 0 && f <= 1) {
		return "", 0, fmt.Errorf("offload %q: want auto, remote, local, or a local fraction in [0, 1] such as 0.3", s)
	}
	switch f {
	case 0:
		return OffloadRemote, 0, nil
	case 1:
		return OffloadLocal, 1, nil
	}
	return FractionMode(f), f, nil
}

// FractionMode names a fixed fraction as ParseOffload reads it back.
func FractionMode(f float64) string { return "fraction=" + strconv.FormatFloat(f, 'g', 3, 64) }

// canonical is a name as the parsers compare it: trimmed, lower case.
func canonical(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
