//go:build cgo

package fn

// The two passes of resample.go in C when cgo is on: the same arithmetic
// (so the same bytes), compiled by GCC with -O3, which vectorizes the
// vertical pass, for AVX2 too where the processor has it (target_clones
// picks at load time).

/*
#cgo CFLAGS: -O3
#include <stddef.h>
#include <stdint.h>

#define FM_PB 22

static inline unsigned char fm_clip8(int32_t v) {
	v >>= FM_PB;
	return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
# define FM_CLONES __attribute__((target_clones("avx2", "default")))
#else
# define FM_CLONES
#endif

FM_CLONES
static void fm_resample_h(unsigned char *dst, int dst_stride, const unsigned char *src, int stride,
		int first, int rows, int c, int ow, const int32_t *start, const int32_t *n, const int32_t *k, int ks) {
	for (int y = 0; y < rows; y++) {
		const unsigned char *in = src + (size_t)(first + y) * stride;
		unsigned char *out = dst + (size_t)y * dst_stride;
		if (c == 3) {
			for (int xx = 0; xx < ow; xx++) {
				const int32_t *kk = k + (size_t)xx * ks;
				const unsigned char *p = in + (size_t)start[xx] * 3;
				int32_t s0 = 1 << (FM_PB - 1), s1 = s0, s2 = s0;
				for (int x = 0; x < n[xx]; x++) {
					s0 += p[3 * x] * kk[x];
					s1 += p[3 * x + 1] * kk[x];
					s2 += p[3 * x + 2] * kk[x];
				}
				out[3 * xx] = fm_clip8(s0);
				out[3 * xx + 1] = fm_clip8(s1);
				out[3 * xx + 2] = fm_clip8(s2);
			}
			continue;
		}
		for (int xx = 0; xx < ow; xx++) {
			const int32_t *kk = k + (size_t)xx * ks;
			const unsigned char *p = in + (size_t)start[xx] * c;
			for (int ch = 0; ch < c; ch++) {
				int32_t s = 1 << (FM_PB - 1);
				for (int x = 0; x < n[xx]; x++) s += p[x * c + ch] * kk[x];
				out[xx * c + ch] = fm_clip8(s);
			}
		}
	}
}

// acc holds row_bytes int32s of scratch.
FM_CLONES
static void fm_resample_v(unsigned char *dst, int row_bytes, const unsigned char *src, int stride, int oh,
		const int32_t *start, const int32_t *n, const int32_t *k, int ks, int32_t *acc) {
	for (int yy = 0; yy < oh; yy++) {
		const int32_t *kk = k + (size_t)yy * ks;
		const unsigned char *base = src + (size_t)start[yy] * stride;
		unsigned char *out = dst + (size_t)yy * row_bytes;
		for (int x = 0; x < row_bytes; x++) acc[x] = (1 << (FM_PB - 1)) + base[x] * kk[0];
		for (int y = 1; y < n[yy]; y++) {
			const unsigned char *r = base + (size_t)y * stride;
			int32_t kv = kk[y];
			for (int x = 0; x < row_bytes; x++) acc[x] += r[x] * kv;
		}
		for (int x = 0; x < row_bytes; x++) out[x] = fm_clip8(acc[x]);
	}
}
*/
import "C"

import "unsafe"

func resampleH(dst []byte, dstStride int, src []byte, stride, first, rows, c int, k *coeffs) {
	ow := len(k.start)
	if rows == 0 || ow == 0 {
		return
	}
	C.fm_resample_h((*C.uchar)(unsafe.Pointer(&dst[0])), C.int(dstStride), (*C.uchar)(unsafe.Pointer(&src[0])), C.int(stride),
		C.int(first), C.int(rows), C.int(c), C.int(ow), (*C.int32_t)(unsafe.Pointer(&k.start[0])), (*C.int32_t)(unsafe.Pointer(&k.n[0])),
		(*C.int32_t)(unsafe.Pointer(&k.k[0])), C.int(k.ksize))
}

func resampleV(dst []byte, rowBytes int, src []byte, stride, oh int, k *coeffs, acc []int32) {
	if oh == 0 || rowBytes == 0 {
		return
	}
	C.fm_resample_v((*C.uchar)(unsafe.Pointer(&dst[0])), C.int(rowBytes), (*C.uchar)(unsafe.Pointer(&src[0])), C.int(stride), C.int(oh),
		(*C.int32_t)(unsafe.Pointer(&k.start[0])), (*C.int32_t)(unsafe.Pointer(&k.n[0])), (*C.int32_t)(unsafe.Pointer(&k.k[0])), C.int(k.ksize),
		(*C.int32_t)(unsafe.Pointer(&acc[0])))
}
