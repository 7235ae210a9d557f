package transportbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/feedmesh/feedmesh/tensor"
	"github.com/feedmesh/feedmesh/transport"
	"github.com/feedmesh/feedmesh/transport/batch"
)

// senderMaxWindow is the worker's cap on a client's credit window, as
// mesh.DefaultConfig's Worker.MaxWindow.
const senderMaxWindow = 64

// feedmeshConfig is transport.DefaultConfig with the window levers applied.
func feedmeshConfig(o peerOptions) transport.Config {
	c := transport.DefaultConfig()
	if o.streamWindow > 0 {
		c.StreamReceiveWindow = o.streamWindow
	}
	if o.connWindow > 0 {
		c.ConnectionReceiveWindow = o.connWindow
	}
	c.ConnectionReceiveWindow = max(c.ConnectionReceiveWindow, c.StreamReceiveWindow)
	c.DataConns = max(o.streams, 1)
	if o.groOff {
		c.GROBuffers = 0
	}
	return c
}

// sendCoalesce is the worker's default Worker.SendCoalesce.
const sendCoalesce = 16

// feedmeshSend plays the worker: a transport listening on o.listen accepts
// o.conns batch streams and sends on each, under the client's credit, for
// o.seconds: the same encoded batch (one uint8 tensor of o.size random
// bytes), or with a payload file its text batches in order, cycling, each
// encoded as the shipped worker does (batch.ShippedEncodeOptions: unpadded, token ids narrowed). The
// frames are encoded once and reused, except with o.compress (the
// receiver's request, checked) or o.fresh: then each batch is encoded anew
// for each send, and compressed, in the measured window.
func feedmeshSend(ctx context.Context, o peerOptions, stdin io.Reader, stdout io.Writer) (result, error) {
	cfg := feedmeshConfig(o)
	if err := cfg.Validate(); err != nil {
		return result{}, err
	}
	codec, err := transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		return result{}, err
	}
	frames, err := senderFrames(codec, o)
	if err != nil {
		return result{}, err
	}
	pc, err := net.ListenPacket("udp", o.listen)
	if err != nil {
		return result{}, err
	}
	defer pc.Close()
	srvTLS, cliTLS, err := selfSigned(transport.ALPN)
	if err != nil {
		return result{}, err
	}
	tr, err := transport.New(pc, srvTLS, cliTLS, cfg, nil)
	if err != nil {
		return result{}, err
	}
	defer tr.Close()
	stop := context.AfterFunc(ctx, func() { tr.Close() }) // unblocks Accept
	defer stop()
	if err := printAddr(stdout, pc.LocalAddr().String()); err != nil {
		return result{}, err
	}

	nStreams := o.conns * max(o.streams, 1)
	senders := make([]*batch.Sender, 0, nStreams)
	defer func() {
		for _, s := range senders {
			s.Close()
		}
	}()
	ln := tr.Listener(transport.KindData)
	for len(senders) < nStreams {
		c, err := ln.Accept()
		if err != nil {
			return result{}, fmt.Errorf("accept stream %d: %w", len(senders), err)
		}
		s, req, err := batch.Accept(ctx, codec, c, senderMaxWindow)
		if err != nil {
			return result{}, err
		}
		senders = append(senders, s)
		if req.Compression != o.compress {
			return result{}, fmt.Errorf("stream %d: the receiver asked for compression %v, the sender was told %v", len(senders)-1, req.Compression, o.compress)
		}
	}

	fresh := o.fresh || o.compress != batch.CompressNone
	m := startMeter()
	end := m.t0.Add(time.Duration(o.seconds * float64(time.Second)))
	var sent, padded, wire atomic.Int64
	errs := make([]error, len(senders))
	var wg sync.WaitGroup
	for i, s := range senders {
		wg.Go(func() {
			var n, b, w int64
			defer func() { sent.Add(n); padded.Add(b); wire.Add(w) }()
			// As the worker's stream loop: take as many ready batches as
			// the client has credit for (at most SendCoalesce) and write
			// them together; with --send-one, one at a time.
			fs := make([]*batch.Frame, 0, sendCoalesce)
			for k := 0; time.Now().Before(end); {
				fs = fs[:0]
				take := 1
				if !o.sendOne {
					take = max(min(s.Available(), sendCoalesce), 1)
				}
				for range take {
					if !fresh {
						fs = append(fs, frames[k].f)
						n, b, w = n+1, b+frames[k].padded, w+frames[k].wire
						k = (k + 1) % len(frames)
						continue
					}
					// A worker compresses each batch once, as it sends it;
					// Compressed caches its result on the frame, so a
					// reused frame would be compressed only once here:
					// encode the batch anew (no tensor copy) and compress
					// it now, in the measured window, to count what goes
					// on the wire (the Sender's own Compressed call then
					// returns it as it is). The encode=fresh variant does
					// the same without compressing (Compressed(none) is
					// f): the reference for the compressed variants' CPU.
					f, err := frames[k].src.encode(codec)
					if err == nil {
						f, err = f.Compressed(o.compress)
					}
					if err != nil {
						errs[i] = err
						return
					}
					fs = append(fs, f)
					n, b, w = n+1, b+frames[k].padded, w+f.Size()+framePrefix
					k = (k + 1) % len(frames)
				}
				if _, err := s.SendAll(ctx, fs); err != nil {
					errs[i] = err
					return
				}
			}
			errs[i] = s.EndContext(ctx, nil)
		})
	}
	wg.Wait()
	res := m.result("send", padded.Load(), sent.Load())
	res.WireBytes = wire.Load()
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	waitRelease(ctx, stdin) // keep the connections until the receiver is done
	return res, nil
}

// sendFrame is one encoded batch of a sender's cycle.
type sendFrame struct {
	f      *batch.Frame
	padded int64        // bytes counted for it: o.size, or its padded record's length
	wire   int64        // bytes f takes on the stream (length prefix included)
	src    *batchSource // what f was encoded from
}

// batchSource is what a sendFrame was encoded from.
type batchSource struct {
	el  tensor.Element
	hdr batch.Header
	opt batch.EncodeOptions
}

// encode encodes the batch (again): a new Frame, sharing the tensors'
// bytes, not compressed yet.
func (s *batchSource) encode(codec *transport.Codec) (*batch.Frame, error) {
	return batch.EncodeWith(codec, s.hdr, s.el, s.opt)
}

// framePrefix is the bytes the codec writes before a frame's header (its
// version and lengths), beyond Frame.Size.
var framePrefix = func() int64 {
	codec, err := benchCodec()
	if err != nil {
		panic(err)
	}
	f, err := batch.Encode(codec, batch.Header{}, tensor.Element{})
	if err != nil {
		panic(err)
	}
	n, err := f.WriteTo(io.Discard)
	if err != nil {
		panic(err)
	}
	return n - f.Size()
}()

// senderFrames encodes what a feedmesh sender cycles through.
func senderFrames(codec *transport.Codec, o peerOptions) ([]sendFrame, error) {
	var sfs []sendFrame
	if o.payloadFile == "" {
		e := tensor.Element{Tensors: []tensor.Tensor{{Name: "data", DType: tensor.Uint8, Shape: []int64{int64(o.size)}, Data: randomBytes(o.size)}}}
		sfs = []sendFrame{{padded: int64(o.size), src: &batchSource{el: e, hdr: batch.Header{Worker: "bench-sender"}}}}
	} else {
		tbs, err := loadTextBatches(codec, o.payloadFile)
		if err != nil {
			return nil, err
		}
		sfs = make([]sendFrame, len(tbs))
		opt := batch.ShippedEncodeOptions
		opt.Narrow = !o.noNarrow
		for i, tb := range tbs {
			src := &batchSource{el: tb.el, hdr: batch.Header{Worker: "bench-sender", Seq: uint64(i)}, opt: opt}
			sfs[i] = sendFrame{padded: tb.paddedBytes, src: src}
		}
	}
	for i := range sfs {
		f, err := sfs[i].src.encode(codec)
		if err != nil {
			return nil, fmt.Errorf("encode batch %d: %w", i, err)
		}
		sfs[i].f, sfs[i].wire = f, f.Size()+framePrefix
	}
	return sfs, nil
}

// feedmeshRecv plays the client: o.conns client transports (each its own UDP
// socket, so each its own QUIC connection) each open one batch stream with
// o.credit credits and read until the worker's End.
func feedmeshRecv(ctx context.Context, o peerOptions) (result, error) {
	cfg := feedmeshConfig(o)
	if err := cfg.Validate(); err != nil {
		return result{}, err
	}
	codec, err := transport.NewCodec(cfg.MaxHeaderBytes, cfg.MaxFrameBytes)
	if err != nil {
		return result{}, err
	}
	_, cliTLS, err := selfSigned(transport.ALPN)
	if err != nil {
		return result{}, err
	}
	var closers []io.Closer // closed in reverse order
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i].Close()
		}
	}()
	// As the shipped client: default limits, the window grown by bytes
	// (client.Options.WindowBytes), a new buffer per batch unless --release
	// (a consumer calling Batch.Release: buffers from a batch.BufferPool).
	rc := batch.ReceiverConfig{Limits: batch.DefaultLimits(), WindowBytes: batch.DefaultWindowBytes}
	if o.fixedWindow {
		rc.WindowBytes = 0
	}
	var pool *batch.BufferPool
	if o.release {
		pool = batch.NewBufferPool(64 << 20) // client.Options.RecycleBytes' default
	}
	var rcvs []*batch.Receiver
	var recs []*batch.Recorder // per receiver, with --release
	for i := range o.conns {
		pc, err := net.ListenPacket("udp", ":0")
		if err != nil {
			return result{}, err
		}
		closers = append(closers, pc)
		tr, err := transport.New(pc, nil, cliTLS, cfg, nil)
		if err != nil {
			return result{}, err
		}
		closers = append(closers, tr)
		for j := range max(o.streams, 1) {
			var rec *batch.Recorder
			rcj := rc
			if pool != nil {
				rec = pool.Recorder()
				rcj.Alloc = rec.Alloc
			}
			r, err := batch.OpenConfig(ctx, tr, codec, o.addr, batch.OpenRequest{Job: "bench", Consumer: fmt.Sprintf("%d.%d", i, j), Window: o.credit, Compression: o.compress}, rcj)
			if err != nil {
				return result{}, err
			}
			closers = append(closers, r)
			rcvs = append(rcvs, r)
			recs = append(recs, rec)
		}
	}

	var want []textBatch // text workload: what batch k of each stream must be
	if o.payloadFile != "" {
		if want, err = loadTextBatches(codec, o.payloadFile); err != nil {
			return result{}, err
		}
	}

	var (
		once             sync.Once
		m                meter
		batches, counted atomic.Int64
		wg               sync.WaitGroup
	)
	errs := make([]error, len(rcvs))
	for i, r := range rcvs {
		wg.Go(func() {
			for k := 0; ; k++ {
				_, e, err := r.Next(ctx)
				if err == io.EOF {
					return
				}
				if err != nil {
					errs[i] = err
					return
				}
				if k == 0 && r.Compression() != o.compress {
					errs[i] = fmt.Errorf("stream %d: asked for compression %v, the worker confirmed %v", i, o.compress, r.Compression())
					return
				}
				size := int64(o.size)
				if want != nil {
					w := want[k%len(want)]
					if err := checkTextBatch(e, w.el, k == 0); err != nil {
						errs[i] = fmt.Errorf("stream %d batch %d: %w", i, k, err)
						return
					}
					size = w.paddedBytes
				} else if len(e.Tensors) != 1 || len(e.Tensors[0].Data) != o.size {
					errs[i] = fmt.Errorf("stream %d: batch of %d bytes, want one tensor of %d", i, e.ByteSize(), o.size)
					return
				}
				if rec := recs[i]; rec != nil {
					rec.Put(rec.Take()) // the batch is consumed: as Batch.Release
				}
				first := false
				once.Do(func() { m, first = startMeter(), true }) // the window starts after the first batch
				if !first {
					batches.Add(1)
					counted.Add(size)
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	return m.result("recv", counted.Load(), batches.Load()), nil
}

// checkTextBatch checks a received text batch against the one sent: its
// tensors' names, dtypes, shapes and sizes, and with full also their bytes
// (done on each stream's first batch only, to keep the check cheap).
func checkTextBatch(got, want tensor.Element, full bool) error {
	if err := sameShape(got, want); err != nil {
		return err
	}
	if full {
		for i := range want.Tensors {
			if !bytes.Equal(got.Tensors[i].Data, want.Tensors[i].Data) {
				return fmt.Errorf("tensor %q differs from the batch sent", want.Tensors[i].Name)
			}
		}
	}
	return nil
}
