// Command libfeedmesh is feedmesh's Go client (package client) as a C
// shared library, for the Python package in python/feedmesh (ctypes) and
// any other language with a C FFI:
//
//	go build -buildmode=c-shared -o python/feedmesh/libfeedmesh.so ./cmd/libfeedmesh
//
// (pip install ./python runs that build, stripped and trimmed, and puts
// the library into the installed package: python/setup.py.)
//
// The library is the Go client itself, so a Python trainer gets the same
// semantics (failover, exactly-once delivery, checkpoints, coordinated
// reads, sharing) and the same messages. It links what the client links
// (api, transport, pipeline), never Raft, bbolt or memberlist.
//
// # The C API
//
// Handle-based: fm_dial returns a client handle, fm_distribute and
// fm_attach an iterator handle, fm_next a batch (an fm_batch in C memory
// carrying its handle). fm_next_meta is fm_next for callers that want no C
// structs (the Python package): it describes the batch as one flat record
// of int64 words in a buffer the caller owns and reuses, with the names
// (tensors', workers') as numbers that fm_iter_name resolves once per
// iterator, so a batch costs the caller one call and no allocation to
// read. Handles are numbers in a table (objects.go), so a
// stale or released handle is an error (FM_ERR_CLOSED), never a crash.
// Every function returns a status code and, on error, a message in C
// memory (fm_free it); errors.go maps the Go client's errors to kinds:
// not found, no quorum, invalid spec, job in use, bad checkpoint,
// closed, invalid argument, unavailable, permission denied, other. fm_abi_version lets a
// caller refuse a library built from another version of the API;
// fm_version is feedmesh's version (internal/version).
//
// fm_next waits at most the timeout it is given, so a caller waits in
// slices and handles signals (Ctrl-C) between them; the Go runtime does
// not take over SIGINT in a c-shared library (os/signal).
//
// # Memory
//
// A batch's tensor bytes are not copied: the fm_batch (or record) points into the
// buffers it was received into, pinned with runtime.Pinner until
// fm_batch_release, which hands them back to the client's pool
// (client.Batch.Release). capi.go says why that is legal under cgo's
// pointer rules. The Python package releases a batch once no array views
// it any more.
//
// # Fork
//
// The Go runtime does not survive fork(): a child process cannot call
// into a library its parent had loaded. The Python package refuses that
// use with feedmesh.ForkError; spawned processes load their own copy.
package main
