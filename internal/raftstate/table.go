package raftstate

// handler applies one command type to the state. Handlers are pure: they
// read only the command and the state, and return an error (never panic) for
// anything they cannot apply; on error they must leave the state unchanged.
type handler struct {
	name string
	// minVersion..maxVersion are the body schema versions this node knows.
	minVersion, maxVersion uint16
	apply                  func(s *State, c Command) (any, error)
}

// commandTable is the FSM's dispatch table. To add a command: a CommandType
// constant, a body struct, a constructor, and an entry here. To change a
// body's schema: bump maxVersion and branch on c.Version in the handler;
// never change what an existing version means.
var commandTable = map[CommandType]handler{
	TypePutKV:         {name: "PutKV", minVersion: 1, maxVersion: 1, apply: applyPutKV},
	TypeDeleteKV:      {name: "DeleteKV", minVersion: 1, maxVersion: 1, apply: applyDeleteKV},
	TypePutKVIfAbsent: {name: "PutKVIfAbsent", minVersion: 1, maxVersion: 1, apply: applyPutKVIfAbsent},

	TypeRegisterDataset:   {name: "RegisterDataset", minVersion: 1, maxVersion: 1, apply: applyRegisterDataset},
	TypeCreateJob:         {name: "CreateJob", minVersion: 1, maxVersion: 5, apply: applyCreateJob},
	TypeAttachConsumer:    {name: "AttachConsumer", minVersion: 1, maxVersion: 2, apply: applyAttachConsumer},
	TypeDetachConsumer:    {name: "DetachConsumer", minVersion: 1, maxVersion: 2, apply: applyDetachConsumer},
	TypeExpireConsumers:   {name: "ExpireConsumers", minVersion: 1, maxVersion: 1, apply: applyExpireConsumers},
	TypeAssignTask:        {name: "AssignTask", minVersion: 1, maxVersion: 2, apply: applyAssignTask},
	TypeLeaseSplits:       {name: "LeaseSplits", minVersion: 1, maxVersion: 3, apply: applyLeaseSplits},
	TypeFinishSplits:      {name: "FinishSplits", minVersion: 1, maxVersion: 1, apply: applyFinishSplits},
	TypeExpireWorker:      {name: "ExpireWorker", minVersion: 1, maxVersion: 2, apply: applyExpireWorker},
	TypeGarbageCollectJob: {name: "GarbageCollectJob", minVersion: 1, maxVersion: 1, apply: applyGarbageCollectJob},
	TypeReportRound:       {name: "ReportRound", minVersion: 1, maxVersion: 1, apply: applyReportRound},
	TypeEndTask:           {name: "EndTask", minVersion: 1, maxVersion: 1, apply: applyEndTask},
	TypeProduceSplits:     {name: "ProduceSplits", minVersion: 1, maxVersion: 1, apply: applyProduceSplits},
	TypeHandBackSplits:    {name: "HandBackSplits", minVersion: 1, maxVersion: 1, apply: applyHandBackSplits},
	TypeDrainTask:         {name: "DrainTask", minVersion: 1, maxVersion: 2, apply: applyDrainTask},
	TypeReceipts:          {name: "Receipts", minVersion: 1, maxVersion: 1, apply: applyReceipts},
	TypeAllocateJob:       {name: "AllocateJob", minVersion: 1, maxVersion: 1, apply: applyAllocateJob},
	TypeOffload:           {name: "Offload", minVersion: 1, maxVersion: 2, apply: applyOffload},
}
