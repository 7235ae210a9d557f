//go:build !linux

package transport

import "net"

// wrapGRO is a no-op off Linux: UDP_GRO is a Linux socket option.
func wrapGRO(pc net.PacketConn, buffers int) net.PacketConn { return pc }
