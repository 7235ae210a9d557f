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
// Files:
//
//	transport.go  Transport: the QUIC endpoint on one UDP socket, stream kinds, Close
//	accept.go     accepting connections and routing their streams by kind
//	dial.go       Dial with its connection cache
//	config.go     Config, its presets (DefaultConfig, FastConfig) and bounds
//	listener.go   the per-kind listener that accepted streams are routed to, bounded by AcceptBacklog
//	limits.go     limits against hostile peers: per-address and per-connection counts, idle reads
//	budget.go     ByteBudget: a counting semaphore of bytes (request bytes here, the client's prefetch bytes)
//	stream.go     Stream: a QUIC stream as a net.Conn (Raft's transport needs one)
//	frame.go      Codec: frames of a CBOR header and a raw tail, with their size bounds; HeaderDecoder
//	rpc.go        RPCServer and Call: one request/response per control stream
//	rpcerror.go   Error: typed errors that cross the wire by code
//	tls.go        DevTLS, MutualTLS, ClientTLS: the configs and their verification of peers
//	identity.go   Identity (spiffe://<cluster>/node|client/<name>), PeerIdentity, PeerFromContext
//	pki.go        a cluster's CA and the node and client certificates it issues
//	gro.go        UDP generic receive offload on Linux (gro_other.go elsewhere)
//
// The batch stream on top of KindData streams is package transport/batch.
package transport
