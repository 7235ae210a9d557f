// Package membudget tests per-task memory budgets on real nodes (issue
// 37, item 5): a spec whose buffering ops hold more than the node's
// --task-memory-budget fails alone, naming the op, while other jobs on
// the same nodes complete and the process's heap stays bounded.
package membudget
