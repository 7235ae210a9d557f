package formats

// slab hands out record buffers carved from larger allocations, so reading
// small records costs one allocation per slab rather than per record. Each
// slice is capped at its length so appends never run into a neighbour.
type slab struct{ buf []byte }

const slabBytes = 64 << 10

func (s *slab) copy(b []byte) []byte {
	if len(b) > slabBytes/4 {
		return append([]byte(nil), b...)
	}
	if len(s.buf)+len(b) > cap(s.buf) {
		s.buf = make([]byte, 0, slabBytes)
	}
	n := len(s.buf)
	s.buf = append(s.buf, b...)
	return s.buf[n:len(s.buf):len(s.buf)]
}

// alloc returns a zeroed n-byte buffer carved from the slab.
func (s *slab) alloc(n int) []byte {
	if n > slabBytes/4 {
		return make([]byte, n)
	}
	if len(s.buf)+n > cap(s.buf) {
		s.buf = make([]byte, 0, slabBytes)
	}
	k := len(s.buf)
	s.buf = s.buf[:k+n]
	return s.buf[k : k+n : k+n]
}

// copyString is copy for a string.
func (s *slab) copyString(v string) []byte {
	b := s.alloc(len(v))
	copy(b, v)
	return b
}
