package jobspec

import "strings"

// A local worker is a pipeline that a consumer runs in its own process
// (the client's offload): it leases DYNAMIC splits
// under a worker name of its own, derived from its consumer's id, so that
// the state machine can tie its life to its consumer's (it is expired when
// the consumer leaves) and other consumers can tell it from a node.

// LocalWorkerPrefix starts the worker name of a consumer's local worker.
// Node names do not contain '@'.
const LocalWorkerPrefix = "client@"

// LocalWorkerName is the worker name of consumer's local worker.
func LocalWorkerName(consumer string) string { return LocalWorkerPrefix + consumer }

// LocalWorkerOf returns the consumer whose local worker name is, or false
// when name is a node's.
func LocalWorkerOf(name string) (consumer string, ok bool) {
	return strings.CutPrefix(name, LocalWorkerPrefix)
}
