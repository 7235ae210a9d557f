// Package jobtest holds what the system tests (systemtest/...) share to
// run jobs on an in-process cluster (testcluster) and check what they
// delivered: dialing a node (Dial), reading a job to its end (Drain,
// Collect, CollectAll, ReadUntil) into a Delivery, checking it
// (CheckExactly), asking the cluster about jobs and members (JobInfo,
// Serving, Alive, MemberStatus, SharedWork, DumpJobOnFailure, RawCall),
// and the pipelines they read (RangeSpec, SlowSpec, ShuffledSpec,
// TextSpec; the op test_autocache_rand).
//
// Every value it reads is a range dataset's element id (tensor "value"),
// so that a Delivery counts each element's deliveries.
package jobtest
