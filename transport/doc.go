// Package transport is feedmesh's network layer: one QUIC transport per node on
// one UDP socket, carrying the three kinds of streams a node uses.
//
//   - KindRaft streams carry hashicorp/raft's NetworkTransport traffic
//     (raftnode.StreamLayer adapts them; this package links no Raft, so
//     the client does not either).
//   - KindControl streams carry one request/response RPC each ([Call],
//     [RPCServer]), with typed errors ([Error]) that survive the wire.
//   - KindData streams carry batches: frames made of a small CBOR header and a
//     raw byte tail ([Codec]) so tensor bytes never go through CBOR.
//
// The first byte of every stream names its kind; the accepting side routes the
// stream to the [net.Listener] of that kind ([Transport.Listener]). Connections
// are TLS 1.3 ([DevTLS], [MutualTLS], [ClientTLS]); under mutual TLS every
// certificate names its holder, a node or a client of the cluster, and
// [PeerIdentity] (in RPC handlers [PeerFromContext]) tells who the peer of a
// stream is. Dialled connections are
// cached per peer address: one for Raft and control streams, one for data
// streams, so unread batches filling a connection's flow-control window never
// hold up heartbeats or RPCs. A cached connection that died (idle timeout,
// stateless reset from a restarted peer) is dropped and redialled on the next
// [Transport.Dial].
//
// Every queue and frame is bounded by a field of [Config]; every goroutine the
// Transport starts has returned when [Transport.Close] returns.
//
// The batch stream on top of KindData streams is package transport/batch.
package transport
