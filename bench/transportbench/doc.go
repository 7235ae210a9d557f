// Package transportbench is the machinery of `feedmesh bench transport`: it
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
// does), feedmesh decodes them and sends each batch unpadded
// (batch.EncodeOptions.Unpadded, the shipped worker's default) to a receiver
// that re-pads it (batch.Receiver) and checks it against the file. quic-raw
// does not run the text workload.
//
// Levers (Config.Levers) are variants of the feedmesh transport measured in
// the same run: GOMAXPROCS=1 in both peers, 2 and 4 QUIC connections per
// pair (one batch stream on each, the sender serving them concurrently), and
// larger stream/connection receive windows.
//
// The peers of the feedmesh transports run in the feedmesh binary itself (a
// hidden mode, see RunPeer); the peer protocol is the one described in
// bench/baseline's doc.go. Paths: loopback, or a veth pair between two network
// namespaces (veth.go, the same set-up as scripts/veth.sh).
//
// Files: harness.go (Config, Run: spawning and timing the pairs), peer.go
// (RunPeer, the protocol), peer_feedmesh.go, peer_quicraw.go, report.go (rows,
// medians, the table), textload.go (the text workload and payload files),
// veth.go.
package transportbench
