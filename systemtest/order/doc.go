// Package order is the system test of deterministic order (order:
// deterministic; docs/jobs/deterministic-order.md) on real in-process
// clusters: the batch sequence a consumer receives is byte for byte the
// one the layout computes, on 1, 2 and 5 nodes, through a node killed
// mid-epoch, and across a checkpoint on 2 nodes resumed on 3; and
// consumers i of N (order_consumer, order_consumers), the same on 2 and 3
// nodes through a kill, together the single consumer's sequence.
package order
