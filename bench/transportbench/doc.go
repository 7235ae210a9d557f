// Package transportbench is the machinery of `feedmesh-bench transport`: it
// measures one-way batch streams between two processes (a sender that plays
// the worker and a receiver that plays the training client) over feedmesh's
// data path and over the baselines, and reports throughput and CPU cost per
// GB side by side, with ratios to gRPC+TLS taken in the same run.
//
// Transports measured:
//   - feedmesh: the data path as shipped — transport.Transport (QUIC, TLS 1.3,
//     DefaultConfig) carrying batch.Encode frames through batch.Sender and
//     batch.Receiver, credits included (client Window 4, as client.Options);
//   - quic-raw: quic-go with its default config, one stream of raw bytes;
//   - grpc-tls, tcp-tls, tcp: the baseline binary built from bench/baseline
//     (its own Go module, so nothing here links gRPC).
//
// Workloads (Config.Workload): raw sends one batch of random bytes per size,
// repeated; text builds the batches of a real NLP pipeline once
// (TextBatches: synthetic heavy-tailed text → tokenize →
// bucket_by_sequence_length), writes them padded to a payload file (one
// record per batch.Encode frame) and has every sender cycle through them:
// the baselines ship the records as they are (padded, as tf.data service
// does), feedmesh decodes them and sends each batch as the shipped worker
// does (batch.ShippedEncodeOptions: unpadded, token ids narrowed to 2
// bytes) to a receiver that re-pads and widens it (batch.Receiver) and
// checks it against the file. quic-raw does not run the text workload.
//
// Levers (Config.Levers) are variants of the feedmesh transport measured in
// the same run, each the shipped path with one change: GOMAXPROCS=1 in both
// peers, 1 or 4 streams per worker, 2 or 4 client sockets (one stream
// each), recycled buffers, GRO off, a fixed credit window, batch-by-batch
// sends, token ids at full width (narrow=off, text only), and the variants
// below.
//
// Compression (Config.Compress, also added by Levers): for each of
// batch.Compressions but none, a variant compress=<name> whose receiver asks
// for it in its batch.OpenRequest (and checks the worker confirmed it); the
// worker's batch.Sender compresses each batch's tail. A real worker
// compresses every batch once, fresh, while the bench sender cycles through
// a few pre-encoded frames and Frame.Compressed caches its result on a
// frame; so these variants encode every batch anew (batch.EncodeWith: no
// tensor copy) and compress it in the sending goroutine, within the
// measured window: their sender CPU-s/GB includes the compression. They
// also pay the encode, which the default row does not (it reuses its
// frames); the variant encode=fresh, added with them, encodes anew without
// compressing and is their CPU reference (BenchmarkSenderFreshFrame splits
// the two per text batch). Every row reports the wire bytes per batch
// (Row.WireBytesPerBatch: feedmesh frames as sent, after unpadding and
// compression; the baselines' batches or padded records); MB/s and
// CPU-s/GB count delivered batch bytes, the same with or without
// compression.
//
// The peers of the feedmesh transports run in the feedmesh binary itself (a
// hidden mode, see RunPeer); the peer protocol is the one described in
// bench/baseline's doc.go. Paths: loopback, or a veth pair between two network
// namespaces (veth.go, the same set-up as scripts/veth.sh). Config.Rate
// limits the veth path's bandwidth: a tc tbf qdisc on the sender's veth end
// (its egress, the batches' direction) for the run, removed afterwards, also
// when the run fails or is interrupted (a killed run leaves it: veth.sh rate
// off or down). Its burst is above a 64 KiB GSO/TSO packet, so such
// packets pass whole and are charged in full; TCP then runs at about 96% of
// the rate (its headers take the rest). scripts/veth.sh rate RATE|off sets
// the same by hand; a run without Rate on namespaces so shaped measures
// under that limit and reports it (Row.Rate).
package transportbench
