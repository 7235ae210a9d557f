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
	int32_t dtype;    // tensor.DType: 1 uint8, 2 int8, 3 int32, 4 int64, 5 float16, 6 bfloat16, 7 float32, 8 float64, 9 bool, 10 bytes
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
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/feedmesh/feedmesh/api"
	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/internal/version"
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

// fm_version returns feedmesh's version (internal/version, the one
// `feedmesh version` prints and the Python package's __version__) as a C
// string: fm_free it.
//
//export fm_version
func fm_version() *C.char { return C.CString(version.Version) }

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
	fitMemoryLimit(o.PrefetchBudget())
	*out = C.uint64_t(table.put(&clientObj{c: c, iters: map[*iterObj]uint64{}}))
	return codeOK
}

// fm_client_close closes the client's iterators, then the client.
//
//export fm_client_close
func fm_client_close(h C.uint64_t, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	c := taken[clientObj](table, uint64(h))
	if c == nil {
		return codeOK // closed already: closing is idempotent
	}
	if err := c.close(); err != nil {
		return fail(errOut, kindOf(err), err)
	}
	return codeOK
}

// fm_distribute creates or joins a job: the spec is YAML or JSON text
// (specKind 0) or a file's path (1), jobJSON the job's options
// (client.JobOptions' JSON: jobOptions), resume a checkpoint or NULL. It sets *out to
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
	n, err := jobOptions(C.GoString(jobJSON), ck)
	if err != nil {
		return fail(errOut, kindOf(err), err)
	}
	// Distribute's own calls are bounded by the client's RequestTimeout.
	it, err := c.c.DistributeNormalized(context.Background(), s, n)
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

// The record fm_next_meta writes: int64 words, a header of metaHeader
// words, then per tensor metaTensor words followed by its shape (ndim
// words). Strings are numbers in the iterator's table of names
// (fm_iter_name). Pointers are addresses; the memory they point to stays
// valid until fm_batch_release(handle), as fm_next's.
const (
	metaWords   = 0 // the record's length in words (header included)
	metaHandle  = 1 // the batch's handle, for fm_batch_release
	metaSeq     = 2 // uint64 as int64
	metaEpoch   = 3
	metaRows    = 4
	metaRound   = 5 // -1 unless coordinated
	metaBucket  = 6 // -1 unless coordinated
	metaWorker  = 7 // the worker's name (a name number)
	metaTensors = 8 // the number of tensors
	metaNames   = 9 // how many names the iterator's table holds: the record's are all below
	metaHeader  = 10

	// Per tensor, at its start: the name's number, dtype (as in fm_tensor),
	// ndim, data (address, 0 when nbytes is 0), nbytes, offsets (address,
	// 0 when noffsets is 0), noffsets; then ndim dimensions.
	metaTensor = 7
)

// metaLen is the length in words of b's record.
func metaLen(b *client.Batch) int {
	n := metaHeader
	for i := range b.Tensors {
		n += metaTensor + len(b.Tensors[i].Shape)
	}
	return n
}

// fm_next_meta is fm_next for callers that want no C structs: it waits up
// to timeoutMs (at least 1) for the next batch and, with FM_OK, describes
// it in the caller's buffer meta (capWords int64 words, at least
// metaHeader) as one flat record (the layout above), without allocating C
// memory. Names come as numbers that the iterator keeps for its lifetime:
// fm_iter_name resolves them (a caller caches them; they repeat every
// batch). Word 0, the record's length, is written last and only with
// FM_OK. When the record does not fit, it returns FM_MORE with meta[1]
// set to the words it needs and keeps the batch for the next call, which
// returns it first. FM_END, FM_TIMEOUT and errors are fm_next's.
//
//export fm_next_meta
func fm_next_meta(h C.uint64_t, timeoutMs C.int32_t, meta *C.int64_t, capWords C.int64_t, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	o, err := typed[iterObj](uint64(h), "iterator")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	if meta == nil || capWords < metaHeader {
		return fail(errOut, codeInvalidArgument, fmt.Errorf("%w: a record buffer of %d words (at least %d)", errArg, capWords, metaHeader))
	}
	b, code, err := o.next(time.Duration(max(timeoutMs, 1)) * time.Millisecond)
	if err != nil {
		return fail(errOut, code, err)
	}
	if code != codeOK {
		return C.int32_t(code)
	}
	rec := unsafe.Slice((*int64)(unsafe.Pointer(meta)), int(min(int64(capWords), 1<<40)))
	need := metaLen(&b)
	if need > len(rec) {
		if !o.hold(b) {
			return fail(errOut, codeClosed, fmt.Errorf("iterator of job %q: %w", o.it.Job(), errClosed))
		}
		// Not in word 0: a caller may take a non-zero word 0 for a batch.
		rec[metaHandle] = int64(need)
		return codeMore
	}
	bo := &batchObj{b: b}
	ts := bo.b.Tensors
	// Pin before the addresses go to C (see batchObj): they go as
	// integers, which cgocheck2 does not see, but the rule is the same.
	for i := range ts {
		if len(ts[i].Data) > 0 {
			bo.pin.Pin(&ts[i].Data[0])
		}
		if len(ts[i].Offsets) > 0 {
			bo.pin.Pin(&ts[i].Offsets[0])
		}
	}
	rec[metaSeq], rec[metaEpoch], rec[metaRows] = int64(b.Seq), b.Epoch, b.Rows()
	rec[metaRound], rec[metaBucket] = -1, -1
	if r := b.Round; r != nil {
		rec[metaRound], rec[metaBucket] = r.Round, int64(r.Bucket)
	}
	rec[metaTensors] = int64(len(ts))
	w := rec[metaHeader:need]
	o.nmu.Lock()
	rec[metaWorker] = o.nameID(b.Worker)
	for i := range ts {
		t := &ts[i]
		var data, offs int64
		if len(t.Data) > 0 {
			data = int64(uintptr(unsafe.Pointer(&t.Data[0])))
		}
		if len(t.Offsets) > 0 {
			offs = int64(uintptr(unsafe.Pointer(&t.Offsets[0])))
		}
		w[0], w[1], w[2], w[3], w[4], w[5], w[6] = o.nameID(t.Name), int64(t.DType), int64(len(t.Shape)), data, int64(len(t.Data)), offs, int64(len(t.Offsets))
		copy(w[metaTensor:], t.Shape)
		w = w[metaTensor+len(t.Shape):]
	}
	rec[metaNames] = int64(len(o.names))
	o.nmu.Unlock()
	rec[metaHandle] = int64(table.put(bo))
	rec[metaWords] = int64(need)
	return codeOK
}

// fm_iter_name sets *out to the name numbered id in the iterator's table
// (fm_next_meta's records), as a C string (fm_free it).
//
//export fm_iter_name
func fm_iter_name(h C.uint64_t, id C.int64_t, out **C.char, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	o, err := typed[iterObj](uint64(h), "iterator")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	name, ok := o.name(int64(id))
	if !ok {
		return fail(errOut, codeInvalidArgument, fmt.Errorf("%w: no name numbered %d", errArg, id))
	}
	*out = C.CString(name)
	return codeOK
}

// fm_batch_release gives a batch back: its fm_batch and tensor memory
// must not be touched afterwards. A second release of a handle returns
// FM_ERR_CLOSED and does nothing.
//
//export fm_batch_release
func fm_batch_release(h C.uint64_t) (rc C.int32_t) {
	defer guard(&rc, nil)
	o := taken[batchObj](table, uint64(h))
	if o == nil {
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

// fm_audit sets *out to the iterator's visitation audit as JSON (a list
// of client.EpochAudit; null for a job whose order is not
// deterministic): C memory, fm_free it.
//
//export fm_audit
func fm_audit(h C.uint64_t, out **C.char, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	o, err := typed[iterObj](uint64(h), "iterator")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	js, err := json.Marshal(o.it.Audit())
	if err != nil {
		return fail(errOut, codeOther, err)
	}
	*out = C.CString(string(js))
	return codeOK
}

// fm_job sets *out to the job named name as the cluster holds it, as JSON
// (api.JobInfo, plus created_at_unix: its creation in Unix seconds): C
// memory, fm_free it.
//
//export fm_job
func fm_job(h C.uint64_t, name *C.char, out **C.char, errOut **C.char) (rc C.int32_t) {
	defer guard(&rc, errOut)
	c, err := typed[clientObj](uint64(h), "client")
	if err != nil {
		return fail(errOut, codeClosed, err)
	}
	info, err := c.c.Job(context.Background(), C.GoString(name))
	if err != nil {
		return fail(errOut, kindOf(err), err)
	}
	js, err := json.Marshal(struct {
		api.JobInfo
		CreatedAtUnix float64 `json:"created_at_unix"`
	}{info, float64(info.CreatedAt.UnixNano()) / 1e9})
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
	o := taken[iterObj](table, uint64(h))
	if o == nil {
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
	meta *C.fm_batch // C memory: the fm_batch, its tensors, shapes and names (nil for fm_next_meta's)
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
	if o.meta != nil { // fm_next's; fm_next_meta's have none
		C.free(unsafe.Pointer(o.meta))
		o.meta = nil
	}
	o.pin.Unpin()
	o.b.Release()
}
