package fsmtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/feedmesh/feedmesh/internal/fsm"
)

// Start is where every Env's clock starts; times print relative to it.
var Start = time.Unix(1_700_000_000, 0)

// Env is one replica of the replicated state, driven by a script, with
// what the proposers around it would hold: the clock they stamp commands
// with, and each worker's and consumer's request numbers.
type Env struct {
	// State is the replica's state; Index the log index of the last
	// entry applied to it (or refused: an entry keeps its index).
	State *fsm.State
	Index uint64
	// Now is the proposers' clock (tick moves it).
	Now time.Time
	// Upgrade proposes each create-job and resume as the nodes do since
	// CreateJob v6 (fsm.UpgradeCreateJob; one whose options are invalid
	// stays as written): a script must read the same either way.
	Upgrade bool

	requests map[string]uint64 // worker → its last lease request id
	seqs     map[string]uint64 // job/consumer → its last receipts number
}

// New returns an Env over the empty state every replica starts from.
func New() *Env {
	return &Env{State: fsm.NewState(), Now: Start, requests: map[string]uint64{}, seqs: map[string]uint64{}}
}

// Apply commits c as the next log entry: stamped with Now (unless c has
// its own At), encoded and decoded as the log carries it, and applied at
// its index.
func (e *Env) Apply(c fsm.Command) (any, error) {
	if c.At == 0 {
		c.At = e.Now.UnixNano()
	}
	if e.Upgrade {
		c, _ = fsm.UpgradeCreateJob(c)
	}
	data, err := fsm.EncodeCommand(c)
	if err != nil {
		return nil, err
	}
	e.Index++
	dec, err := fsm.DecodeCommand(data)
	if err != nil {
		return nil, err
	}
	return e.State.ApplyIndex(e.Index, dec)
}

// handler runs one script command, writing what it has to say to out.
type handler func(e *Env, d *datadriven.TestData, out *strings.Builder) error

// handlers are the script's commands, by name. Each is in its own file.
var handlers = map[string]handler{
	"register-dataset": handleRegisterDataset,
	"create-job":       handleCreateJob,
	"resume":           handleResume,
	"attach":           handleAttach,
	"heartbeat":        handleHeartbeat,
	"detach":           handleDetach,
	"expire-consumers": handleExpireConsumers,
	"assign":           handleAssign,
	"lease":            handleLease,
	"finish":           handleFinish,
	"produce":          handleProduce,
	"receipts":         handleReceipts,
	"worker-dies":      handleWorkerDies,
	"hand-back":        handleHandBack,
	"drain":            handleDrain,
	"rejoin":           handleRejoin,
	"gc":               handleGC,
	"end-task":         handleEndTask,
	"report-round":     handleReportRound,
	"allocate":         handleAllocate,
	"offload":          handleOffload,
	"put":              handlePut,
	"delete":           handleDelete,
	"snapshot":         handleSnapshot,
	"tick":             handleTick,
	"show":             handleShow,
}

// Commands lists the script commands Handle knows, sorted.
func Commands() []string { return slices.Sorted(maps.Keys(handlers)) }

// Handle runs one script command and returns its output: what the
// command answered and the state it leaves, or the error it was refused
// with. A command the script misspells fails the test.
func (e *Env) Handle(t *testing.T, d *datadriven.TestData) string {
	h, ok := handlers[d.Cmd]
	if !ok {
		t.Fatalf("%s: unknown command %q (known: %s)", d.Pos, d.Cmd, strings.Join(Commands(), ", "))
	}
	var out strings.Builder
	if err := h(e, d, &out); err != nil {
		if _, bad := err.(scriptError); bad {
			t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
		}
		fmt.Fprintf(&out, "error: %v\n", err)
	}
	return out.String()
}

// at renders a time (Unix nanoseconds) relative to Start.
func at(ns int64) string { return "t=" + time.Duration(ns-Start.UnixNano()).String() }

// answer writes a command's outcome, "ok: what" or "error: why", and then
// the state of the jobs it concerns (those that exist).
func (e *Env) answer(out *strings.Builder, what string, err error, jobs ...string) {
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
	} else {
		fmt.Fprintf(out, "ok: %s\n", what)
	}
	for _, j := range jobs {
		if _, ok := e.State.Jobs[j]; ok {
			out.WriteString(e.Job(j))
		}
	}
}
