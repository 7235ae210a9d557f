// Package batch is the wire format of feedmesh batches and the
// credit-flow-controlled stream that carries them from a worker to a client
// on a transport.KindData stream.
//
// # Batch frames
//
// One batch is one transport frame ([transport.Codec]). Its CBOR header names
// the message kind and describes the tensors (name, dtype, shape, byte counts)
// plus where the batch comes from (worker, epoch, sequence, provenance); its
// raw tail holds the tensor bytes, so bulk bytes never go through CBOR. [Encode] builds a
// [Frame] that references the tensors' buffers without copying them and can be
// written to any number of streams, also concurrently (ephemeral sharing hands
// one encoded frame to every reader). [Decode] checks the header against
// [Limits] and the tail length against the metadata before it allocates, reads
// the tail into one buffer and slices the tensors out of it.
//
// Provenance (Header.Prov, for exactly-once delivery): the source elements
// the batch holds, as [ProvRange]s, runs [Lo, Hi) of element indices (positions
// within a split) per (epoch, split), sorted and merged, so a batch read in
// order from one split costs one range however many elements it has
// ([AppendProv] builds it from a ranges.Set per split; [Header.Elements]
// counts it). On the wire it is one flat array of integers, four a range
// (key 23); [Decode] rejects more than Limits.MaxProvRanges ranges and any
// range that is negative, empty, out of order or overlaps or touches another
// of its split. A worker that does not track provenance leaves it empty. The
// header key 5 (Splits, a list of split ids nothing filled) is gone and not
// reused; a receiver ignores it like any unknown key.
//
// Tail layout: for each tensor in header order, its data, then for Bytes
// tensors its offsets table (NumOffsets little-endian int64). Every segment
// starts at a multiple of 8 bytes from the start of the tail; the 0–7 bytes of
// padding before it are zero. The padding lets receivers view int32, float32,
// int64 … data and the offsets tables in place (see tensor.Tensor.Float32s)
// instead of copying them out of a misaligned buffer.
//
// Compression ([Compression], [Frame.Compressed]): the whole tail may be
// compressed as one LZ4 block or as zstd (one frame as sent; the receiver
// takes anything that decodes to exactly RawTail bytes). The header then carries the
// compression and the tail's length before it (RawTail); the receiver checks
// the header against that length, reads the compressed bytes into a scratch
// buffer, decompresses into the batch's buffer and requires exactly RawTail
// bytes out (at most the codec's frame bound, like any tail). A client asks
// for a compression in its Open; the worker confirms it (or none) in its
// Accept.
//
// # Stream protocol
//
//	client → worker: Open, then Credit frames as the application consumes batches
//	worker → client: Accept, Batch frames (never more than the granted credit ahead), then one End
//	               or, refusing the Open: one End, which says why
//
// Every header carries a kind field (Batch, Open, Credit, End, Accept), so a
// reader tells the messages apart and rejects out-of-place ones.
//
// The stream is versioned, not flagged: the Open carries the protocol
// version the client speaks ([ProtocolVersion]); a worker that speaks it
// ([MinProtocolVersion] through ProtocolVersion) names it in its Accept and
// keeps to it, and one that does not refuses the Open with an End naming the
// versions it speaks. [Accept] and [Receiver.Next] then return a
// [*VersionError] (wrapping [ErrUnsupportedVersion]) that says whether to
// upgrade the client or the node. Every client of a version re-pads
// unpadded tensors and widens narrowed values, so a worker sends each frame
// as it was encoded (compressed as the Accept says).
//
// A [Receiver]
// grants OpenRequest.Window credits up front and one more for each batch the
// application has finished with (see [Receiver.Next] for the exact rule); a
// [Sender] blocks in Send while Window batches are outstanding, so neither side
// queues more than Window batches per stream. The worker's Accept tells the
// window in force (the client's, clamped to the worker's cap) and the cap. A
// credit may also grow the window (ReceiverConfig.WindowBytes: small batches
// get a larger window, up to the cap), and once the receiver knows the window
// it returns the credits of a large window in groups of a quarter of it. End carries either a clean end
// of data (the client reads io.EOF) or an error message ([RemoteError]).
//
// Batch headers in the form the encoder writes are decoded by a hand-written
// fast path (fastwire.go; about 4x faster than the CBOR library, reusing the
// tensor names of earlier headers); anything else goes to the codec's CBOR
// mode, and FuzzFastHeader checks the two agree.
package batch
