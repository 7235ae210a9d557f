package fsm

import "fmt"

// CommandType selects the handler of a Command.
type CommandType uint16

// The command types: every number the log holds, in one table. A number
// is part of the log format: never renumber or reuse one. Each command's
// body, constructors, checks and handler are in the file named after it,
// cmd_<name>.go; each constructor documents its command and its result.
//
// To add a command: a number here (one no branch has used), its file, and
// its row in commandTable. To change a body's schema: bump the row's
// maxVersion and branch on c.Version in the handler; never change what an
// existing version means.
const (
	TypePutKV    CommandType = 1 // set a key
	TypeDeleteKV CommandType = 2 // remove a key

	TypeRegisterDataset   CommandType = 10 // register a dataset's spec
	TypeCreateJob         CommandType = 11 // create a job, or resume one from checkpoints
	TypeAttachConsumer    CommandType = 12 // attach a consumer or renew its lease (a heartbeat)
	TypeDetachConsumer    CommandType = 13 // detach a consumer
	TypeExpireConsumers   CommandType = 14 // drop the consumers whose lease ran out
	TypeAssignTask        CommandType = 15 // give a worker a task of a job
	TypeLeaseSplits       CommandType = 16 // lease a worker DYNAMIC splits
	TypeFinishSplits      CommandType = 17 // a worker finished leased splits (at-most-once)
	TypeExpireWorker      CommandType = 18 // a worker (or its older process) is dead
	TypeGarbageCollectJob CommandType = 19 // remove a job without consumers
	TypeReportRound       CommandType = 20 // a coordinated consumer reached a round
	TypeEndTask           CommandType = 21 // a worker's task ended, or failed
	TypeProduceSplits     CommandType = 22 // a worker emitted splits (exactly-once)
	TypeReceipts          CommandType = 23 // a consumer's receipts and fences (exactly-once)
	TypeHandBackSplits    CommandType = 24 // a draining worker returns unstarted splits
	TypeDrainTask         CommandType = 25 // a worker drained its task, or rejoins the job
	TypeAllocateJob       CommandType = 26 // the leader's allocation of nodes to a job

	TypePutKVIfAbsent CommandType = 40 // set a key unless it is set (autocache decisions)

	// Numbered away from the others so that commands added beside it on
	// other branches did not clash.
	TypeOffload CommandType = 47 // a consumer's offload request

	TypeGarbageCollectDataset CommandType = 48 // remove a dataset no job reads
	TypePutToken              CommandType = 49 // create an access token
	TypeDeleteToken           CommandType = 50 // revoke an access token

	// Numbered away from the others so that commands added beside it on
	// other branches do not clash.
	TypeQuota CommandType = 60 // a tenant's command, checked against its quotas
)

// handler applies one command type to the state. Handlers are pure: they
// read only the command and the state, and return an error (never panic) for
// anything they cannot apply; on error they must leave the state unchanged.
type handler struct {
	name string
	// minVersion..maxVersion are the body schema versions this node knows.
	minVersion, maxVersion uint16
	apply                  func(s *State, c Command) (any, error)
}

// commandTable is the dispatch table: one row per command type.
var commandTable = map[CommandType]handler{
	TypePutKV:             {name: "PutKV", minVersion: 1, maxVersion: 1, apply: applyPutKV},
	TypeDeleteKV:          {name: "DeleteKV", minVersion: 1, maxVersion: 1, apply: applyDeleteKV},
	TypeRegisterDataset:   {name: "RegisterDataset", minVersion: 1, maxVersion: 2, apply: applyRegisterDataset},
	TypeCreateJob:         {name: "CreateJob", minVersion: 1, maxVersion: createJobMaxVersion, apply: applyCreateJob},
	TypeAttachConsumer:    {name: "AttachConsumer", minVersion: 1, maxVersion: 2, apply: applyAttachConsumer},
	TypeDetachConsumer:    {name: "DetachConsumer", minVersion: 1, maxVersion: 2, apply: applyDetachConsumer},
	TypeExpireConsumers:   {name: "ExpireConsumers", minVersion: 1, maxVersion: 1, apply: applyExpireConsumers},
	TypeAssignTask:        {name: "AssignTask", minVersion: 1, maxVersion: 2, apply: applyAssignTask},
	TypeLeaseSplits:       {name: "LeaseSplits", minVersion: 1, maxVersion: 4, apply: applyLeaseSplits},
	TypeFinishSplits:      {name: "FinishSplits", minVersion: 1, maxVersion: 1, apply: applyFinishSplits},
	TypeExpireWorker:      {name: "ExpireWorker", minVersion: 1, maxVersion: 2, apply: applyExpireWorker},
	TypeGarbageCollectJob: {name: "GarbageCollectJob", minVersion: 1, maxVersion: 1, apply: applyGarbageCollectJob},
	TypeReportRound:       {name: "ReportRound", minVersion: 1, maxVersion: 1, apply: applyReportRound},
	TypeEndTask:           {name: "EndTask", minVersion: 1, maxVersion: 1, apply: applyEndTask},
	TypeProduceSplits:     {name: "ProduceSplits", minVersion: 1, maxVersion: 1, apply: applyProduceSplits},
	TypeReceipts:          {name: "Receipts", minVersion: 1, maxVersion: 1, apply: applyReceipts},
	TypeHandBackSplits:    {name: "HandBackSplits", minVersion: 1, maxVersion: 1, apply: applyHandBackSplits},
	TypeDrainTask:         {name: "DrainTask", minVersion: 1, maxVersion: 2, apply: applyDrainTask},
	TypeAllocateJob:       {name: "AllocateJob", minVersion: 1, maxVersion: 1, apply: applyAllocateJob},
	TypePutKVIfAbsent:     {name: "PutKVIfAbsent", minVersion: 1, maxVersion: 1, apply: applyPutKVIfAbsent},
	TypeOffload:           {name: "Offload", minVersion: 1, maxVersion: 2, apply: applyOffload},

	TypeGarbageCollectDataset: {name: "GarbageCollectDataset", minVersion: 1, maxVersion: 1, apply: applyGarbageCollectDataset},
	TypePutToken:              {name: "PutToken", minVersion: 1, maxVersion: 1, apply: applyPutToken},
	TypeDeleteToken:           {name: "DeleteToken", minVersion: 1, maxVersion: 1, apply: applyDeleteToken},
	TypeQuota:                 {name: "Quota", minVersion: 1, maxVersion: 1, apply: applyQuota},
}

// String names the type for errors and logs.
func (t CommandType) String() string {
	if h, ok := commandTable[t]; ok {
		return h.name
	}
	return fmt.Sprintf("CommandType(%d)", uint16(t))
}
