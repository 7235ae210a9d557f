package fn

// The two passes of resample.go in Go: what builds without cgo run
// (resample_nocgo.go), and what the C passes of resample_cgo.go are
// tested against (the same bytes).

// resampleHGo: rows [first, first+rows) of src → rows of dst.
func resampleHGo(dst []byte, dstStride int, src []byte, stride, first, rows, c int, k *coeffs) {
	const half = 1 << (resamplePrecision - 1)
	ow := len(k.start)
	ks := k.ksize
	for y := 0; y < rows; y++ {
		in := src[(first+y)*stride:]
		out := dst[y*dstStride : y*dstStride+ow*c]
		switch c {
		case 3:
			for xx := 0; xx < ow; xx++ {
				kk := k.k[xx*ks : xx*ks+int(k.n[xx])]
				p := in[int(k.start[xx])*3:]
				p = p[:3*len(kk)]
				s0, s1, s2 := int32(half), int32(half), int32(half)
				for x, kv := range kk {
					q := p[3*x : 3*x+3]
					s0 += int32(q[0]) * kv
					s1 += int32(q[1]) * kv
					s2 += int32(q[2]) * kv
				}
				o := out[3*xx : 3*xx+3]
				o[0], o[1], o[2] = clip8(s0), clip8(s1), clip8(s2)
			}
		case 1:
			for xx := 0; xx < ow; xx++ {
				kk := k.k[xx*ks : xx*ks+int(k.n[xx])]
				p := in[int(k.start[xx]):]
				p = p[:len(kk)]
				s := int32(half)
				for x, kv := range kk {
					s += int32(p[x]) * kv
				}
				out[xx] = clip8(s)
			}
		default:
			for xx := 0; xx < ow; xx++ {
				kk := k.k[xx*ks : xx*ks+int(k.n[xx])]
				p := in[int(k.start[xx])*c:]
				for ch := 0; ch < c; ch++ {
					s := int32(half)
					for x, kv := range kk {
						s += int32(p[x*c+ch]) * kv
					}
					out[xx*c+ch] = clip8(s)
				}
			}
		}
	}
}

// resampleVGo: src rows → dst rows, each dst value a weighted sum down a
// column.
func resampleVGo(dst []byte, rowBytes int, src []byte, stride, oh int, k *coeffs, _ []int32) {
	const half = 1 << (resamplePrecision - 1)
	ks := k.ksize
	for yy := 0; yy < oh; yy++ {
		kk := k.k[yy*ks : yy*ks+int(k.n[yy])]
		base := int(k.start[yy]) * stride
		out := dst[yy*rowBytes : (yy+1)*rowBytes]
		switch len(kk) {
		case 2:
			r0, r1 := src[base:base+rowBytes], src[base+stride:base+stride+rowBytes]
			k0, k1 := kk[0], kk[1]
			for x := range out {
				out[x] = clip8(half + int32(r0[x])*k0 + int32(r1[x])*k1)
			}
		case 3:
			r0, r1, r2 := src[base:base+rowBytes], src[base+stride:base+stride+rowBytes], src[base+2*stride:base+2*stride+rowBytes]
			k0, k1, k2 := kk[0], kk[1], kk[2]
			for x := range out {
				out[x] = clip8(half + int32(r0[x])*k0 + int32(r1[x])*k1 + int32(r2[x])*k2)
			}
		default:
			for x := range out {
				s := int32(half)
				for y, kv := range kk {
					s += int32(src[base+y*stride+x]) * kv
				}
				out[x] = clip8(s)
			}
		}
	}
}
