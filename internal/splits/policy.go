package splits

import (
	"fmt"
	"strings"
)

// Policy is a job's sharding policy. Values are stored in the replicated
// state: never renumber one.
type Policy uint8

const (
	// Off: every worker runs the whole dataset, each with its own shuffle
	// seed. Nothing is leased.
	Off Policy = iota
	// Dynamic: splits are leased first come first served through Raft;
	// exactly-once without failures, at-most-once when a worker dies.
	Dynamic
	// Static: split i is read by workers[i mod n] of the sorted worker
	// list agreed when the job was created.
	Static
)

// String returns "off", "dynamic" or "static".
func (p Policy) String() string {
	switch p {
	case Off:
		return "off"
	case Dynamic:
		return "dynamic"
	case Static:
		return "static"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Valid reports whether p is one of the defined policies.
func (p Policy) Valid() bool { return p <= Static }

// ParsePolicy parses "off", "dynamic" or "static" (case-insensitive, and
// "" means off).
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off", "":
		return Off, nil
	case "dynamic":
		return Dynamic, nil
	case "static":
		return Static, nil
	}
	return Off, fmt.Errorf("unknown sharding policy %q: want off, dynamic or static", s)
}
