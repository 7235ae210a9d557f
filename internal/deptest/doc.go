// Package deptest holds the test that keeps the module's layering true:
// what the client, the C library and the product binary may link, and
// which packages must stay pure. Each rule says why; `go test
// ./internal/deptest` fails, naming the import chain, when a change breaks
// one (as tailscale's tstest/deptest does).
package deptest
