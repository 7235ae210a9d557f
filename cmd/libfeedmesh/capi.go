package main

/*
#include <stdint.h>
#include <stdlib.h>

// One tensor of a batch. name and shape are C memory owned by the batch;
// data and offsets point into the batch's own receive buffers (Go memory
// pinned until fm_batch_release). Bytes tensors (dtype 10) have noffsets
// = product(shape) + 1 offsets into data; others have none.
typedef struct {
	const char *name;
	int32_t dtype;    // pipeline/tensor.DType: 1 uint8, 2 int8, 3 int32, 4 int64, 5 float16, 6 bfloat16, 7 float32, 8 float64, 9 bool, 10 bytes
	int32_t ndim;
	const int64_t *shape;
	void *data;       // NULL when nbytes is 0
	int64_t nbytes;
	const int64_t *offsets;
	int64_t noffsets;
} fm_tensor;

// A batch as fm_next returns it; valid until fm_batch_release(handle).
typedef struct {
	uint64_t handle;
	const char *worker;
	uint64_t seq;
	int64_t epoch;
	int64_t rows;
	int32_t ntensors;
	int32_t bucket;   // coordinated jobs: the round's length bucket; -1 otherwise
	fm_tensor *tensors;
	int64_t round;    // coordinated jobs: the round; -1 otherwise
} fm_batch;
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
)

// maxCheckpointBytes bounds a checkpoint fm_distribute copies in: far
// above what a checkpoint of 65,536 intervals takes (the client refuses
// more), far below what C.GoBytes' int length allows.
const maxCheckpointBytes = 64 << 20

// Every exported function returns a status code (errors.go) and, for an
// error, sets *errOut to a message in C memory that the caller frees with
// fm_free. Strings and buffers the caller passes in are copied before the
// call returns; nothing here keeps a C pointer, and C keeps no Go pointer
// except a batch's tensor data, pinned (see batchObj).

// fail reports err through errOut and returns its code.
func fail(errOut **C.char, code int, err error) C.int32_t {
	if errOut != nil {
		*errOut = C.CString(err.Error())
	}
	return C.int32_t(code)
}

// guard turns a panic in an exported function into an error return: a
// panic crossing into C would abort the Python process.
func guard(rc *C.int32_t, errOut **C.char) {
	if r := recover(); r != nil {
		*rc = fail(errOut, codeOther, fmt.Errorf("feedmesh library: internal error: %v", r))
	}
}

//export fm_abi_version
func fm_abi_version() C.int32_t { return abiVersion }

//export fm_free
func fm_free(p unsafe.Pointer) { C.free(p) }

// fm_dial connects to the node at addr (host:port, its QUIC --port) with
// the options in optsJSON (config.go's dialOptions) and sets *out to the
// client's handle.
//
//export fm_dial
func fm_dial(addr, optsJSON *C.char, out *C.uint64_t, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	a := C.GoString(addr)
	o, timeout, err := clientOptions(a, C.GoString(optsJSON))
	if err != nil {
		return fail(errOut, kindOf(err), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := client.Dial(ctx, a, o)
	if err != nil {
		return fail(errOut, dialKind(err), err)
	}
	*out = C.uint64_t(table.put(&clientObj{c: c, iters: map[*iterObj]uint64{}}))
	return codeOK
}

// fm_client_close closes the client's iterators, then the client.
//
//export fm_client_close
func fm_client_close(h C.uint64_t, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	c, ok := table.take(uint64(h)).(*clientObj)
	if !ok {
		return codeOK // closed already: closing is idempotent
	}
	if err := c.close(); err != nil {
		return fail(errOut, kindOf(err), err)
	}
	return codeOK
}

// fm_distribute creates or joins a job: the spec is YAML or JSON text
// (specKind 0) or a file's path (1), jobJSON the job's options
// (api.JobOptions' JSON), resume a checkpoint or NULL. It sets *out to
// the iterator's handle.
//
//export fm_distribute
func fm_distribute(h C.uint64_t, specKind C.int32_t, spec *C.char, specLen C.int64_t, jobJSON *C.char,
	resume unsafe.Pointer, resumeLen C.int64_t, out *C.uint64_t, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	c, err := typed[clientObj](uint64(h), "client")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	if specLen < 0 || specLen > pipeline.MaxSpecBytes || resumeLen < 0 || resumeLen > maxCheckpointBytes {
		err := fmt.Errorf("%w: a spec of %d bytes (at most %d) or a checkpoint of %d (at most %d)", errArg, specLen, pipeline.MaxSpecBytes, resumeLen, maxCheckpointBytes)
		return fail(errOut, codeInvalidArgument, err)
	}
	s, err := parseSpec(int(specKind), C.GoBytes(unsafe.Pointer(spec), C.int(specLen)))
	if err != nil {
		return fail(errOut, kindOf(err), err)
	}
	var ck []byte
	if resume != nil && resumeLen > 0 {
		ck = C.GoBytes(resume, C.int(resumeLen))
	}
	o, err := jobOptions(C.GoString(jobJSON), ck)
	if err != nil {
		return fail(errOut, kindOf(err), err)
	}
	// Distribute's own calls are bounded by the client's RequestTimeout.
	it, err := c.c.Distribute(context.Background(), s, o)
	if err != nil {
		return fail(errOut, kindOf(err), err)
	}
	ih, err := c.open(it)
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	*out = C.uint64_t(ih)
	return codeOK
}

// fm_attach joins an existing job by name (client.Client.Attach).
//
//export fm_attach
func fm_attach(h C.uint64_t, job *C.char, out *C.uint64_t, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	c, err := typed[clientObj](uint64(h), "client")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	it, err := c.c.Attach(context.Background(), C.GoString(job))
	if err != nil {
		return fail(errOut, kindOf(err), err)
	}
	ih, err := c.open(it)
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	*out = C.uint64_t(ih)
	return codeOK
}

// fm_next waits up to timeoutMs (at least 1) for the next batch: FM_OK
// with *out set, FM_END at the end of the data, FM_TIMEOUT, or an error.
// Callers wait in short slices so that they can handle signals between
// them.
//
//export fm_next
func fm_next(h C.uint64_t, timeoutMs C.int32_t, out **C.fm_batch, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	o, err := typed[iterObj](uint64(h), "iterator")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	b, code, err := o.next(time.Duration(max(timeoutMs, 1)) * time.Millisecond)
	if err != nil {
		return fail(errOut, code, err)
	}
	if code != codeOK {
		return C.int32_t(code)
	}
	*out = newBatchView(b)
	return codeOK
}

// fm_batch_release gives a batch back: its fm_batch and tensor memory
// must not be touched afterwards. A second release of a handle returns
// FM_ERR_CLOSED and does nothing.
//
//export fm_batch_release
func fm_batch_release(h C.uint64_t) (rc C.int32_t) {
	defer guard(&rc, nil)
	o, ok := table.take(uint64(h)).(*batchObj)
	if !ok {
		return codeClosed
	}
	o.release()
	return codeOK
}

// fm_live_batches counts the batches handed out and not yet released.
//
//export fm_live_batches
func fm_live_batches() C.int64_t {
	return C.int64_t(table.count(func(v any) bool { _, ok := v.(*batchObj); return ok }))
}

// fm_checkpoint sets *data (C memory, fm_free it) and *n to the
// iterator's checkpoint (client.Iterator.Checkpoint).
//
//export fm_checkpoint
func fm_checkpoint(h C.uint64_t, data *unsafe.Pointer, n *C.int64_t, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	o, err := typed[iterObj](uint64(h), "iterator")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	ck, err := o.checkpoint()
	if err != nil {
		return fail(errOut, kindOf(err), err)
	}
	*data, *n = C.CBytes(ck), C.int64_t(len(ck))
	return codeOK
}

// fm_stats sets *out to the iterator's statistics as JSON (C memory,
// fm_free it).
//
//export fm_stats
func fm_stats(h C.uint64_t, out **C.char, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	o, err := typed[iterObj](uint64(h), "iterator")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	js, err := o.stats()
	if err != nil {
		return fail(errOut, codeOther, err)
	}
	*out = C.CString(string(js))
	return codeOK
}

// fm_iter_close stops the iterator and detaches it from its job. Batches
// already handed out stay valid until released.
//
//export fm_iter_close
func fm_iter_close(h C.uint64_t, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	o, ok := table.take(uint64(h)).(*iterObj)
	if !ok {
		return codeOK
	}
	o.cl.forget(o)
	if err := o.close(); err != nil && !errors.Is(err, context.Canceled) {
		return fail(errOut, kindOf(err), err)
	}
	return codeOK
}

// batchObj is a batch handed to C. Its tensors' bytes are not copied: C
// gets pointers into the buffers the batch was received into, which is
// legal because they are pinned (runtime.Pinner) from before the pointers
// are stored in C memory until fm_batch_release: cgo's rules let C keep a
// Go pointer "only as long as the memory it points to is pinned", and let
// a Go function called from C store Go pointers to pinned memory through C
// pointers. A pinned object is neither moved nor freed, and the buffers
// hold no Go pointers. Nothing writes to them meanwhile: the client reuses
// a batch's buffers only after Batch.Release, which release calls after
// Unpin, and only once the caller has promised (by releasing) not to read
// them again. Building with GOEXPERIMENT=cgocheck2 checks the stores.
//
// Pinning Go memory rather than receiving into C memory keeps the client
// unchanged and leak-free: batches the client drops on its own (duplicates
// of exactly-once jobs, the buffer at Close) are garbage-collected as
// always, where C buffers would need freeing on every such path.
type batchObj struct {
	b    client.Batch
	pin  runtime.Pinner
	meta *C.fm_batch // C memory: the fm_batch, its tensors, shapes and names
}

// newBatchView pins b's buffers, lays its metadata out in one C
// allocation and registers it under a handle (meta.handle).
func newBatchView(b client.Batch) *C.fm_batch {
	ts := b.Tensors
	size := C.sizeof_fm_batch + len(ts)*C.sizeof_fm_tensor
	for i := range ts {
		size += 8*len(ts[i].Shape) + len(ts[i].Name) + 1
	}
	size += len(b.Worker) + 1
	base := C.malloc(C.size_t(size)) // cgo's malloc never returns nil
	o := &batchObj{b: b, meta: (*C.fm_batch)(base)}
	// The layout: fm_batch, fm_tensor[n], the shapes (int64s), the
	// strings; each part's size keeps the next 8-byte aligned but the
	// strings, which come last.
	tensors := unsafe.Add(base, C.sizeof_fm_batch)
	rest := unsafe.Add(tensors, len(ts)*C.sizeof_fm_tensor)
	str := func(s string) *C.char {
		p := rest
		copy(unsafe.Slice((*byte)(p), len(s)+1), s+"\x00")
		rest = unsafe.Add(rest, len(s)+1)
		return (*C.char)(p)
	}
	ct := unsafe.Slice((*C.fm_tensor)(tensors), len(ts))
	for i := range ts {
		t := &ts[i]
		shape := unsafe.Slice((*C.int64_t)(rest), len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = C.int64_t(d)
		}
		ct[i] = C.fm_tensor{dtype: C.int32_t(t.DType), ndim: C.int32_t(len(t.Shape)), nbytes: C.int64_t(len(t.Data)), noffsets: C.int64_t(len(t.Offsets))}
		if len(t.Shape) > 0 {
			ct[i].shape = &shape[0]
		}
		rest = unsafe.Add(rest, 8*len(t.Shape))
	}
	for i := range ts {
		t := &ts[i]
		ct[i].name = str(t.Name)
		// Pin before the pointer is stored in C memory (cgocheck2 checks
		// the store).
		if len(t.Data) > 0 {
			o.pin.Pin(&t.Data[0])
			ct[i].data = unsafe.Pointer(&t.Data[0])
		}
		if len(t.Offsets) > 0 {
			o.pin.Pin(&t.Offsets[0])
			ct[i].offsets = (*C.int64_t)(unsafe.Pointer(&t.Offsets[0]))
		}
	}
	o.meta.worker = str(b.Worker)
	o.meta.seq, o.meta.epoch, o.meta.rows = C.uint64_t(b.Seq), C.int64_t(b.Epoch), C.int64_t(b.Rows())
	o.meta.ntensors = C.int32_t(len(ts))
	o.meta.round, o.meta.bucket = -1, -1
	if r := b.Round; r != nil {
		o.meta.round, o.meta.bucket = C.int64_t(r.Round), C.int32_t(r.Bucket)
	}
	if len(ts) > 0 {
		o.meta.tensors = (*C.fm_tensor)(tensors)
	}
	o.meta.handle = C.uint64_t(table.put(o))
	return o.meta
}

// release frees the metadata, unpins the buffers and gives them back to
// the client for reuse.
func (o *batchObj) release() {
	C.free(unsafe.Pointer(o.meta))
	o.meta = nil
	o.pin.Unpin()
	o.b.Release()
}
