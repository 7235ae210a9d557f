// Package testutil is the one home of the helpers the module's tests
// share: a context with a deadline for a test (Ctx), polling for a
// condition with a deadline instead of sleeping (WaitFor), and a loopback
// UDP socket that a test can blackhole (Blackhole, Loopback).
//
// It holds no _test.go files so that tests of any package can import it;
// it is imported only by tests (internal/deptest checks that the product
// binary links none of it). It imports nothing of the module, so that a
// package's own (internal) tests can use it without an import cycle; the
// helpers that need the module's packages are in its subpackages:
// quictest (a QUIC transport on loopback) and jobtest (jobs on an
// in-process cluster: dialing, reading, checking what arrived, and the
// specs the system tests share).
package testutil
