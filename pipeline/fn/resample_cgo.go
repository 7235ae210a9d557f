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
#include <string.h>

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

// fm_resample_h_px is the horizontal pass for 3- and 4-channel images
// where the processor has SSE4.1: one output pixel's channels are the
// lanes of one vector, each tap one widening load, one multiply and one
// add for all of them. The sums are the scalar loop's (same order, same
// int32 arithmetic), so the bytes are too. in_w is the width of the input
// rows in pixels: a 3-channel pixel is loaded with the byte after it,
// except the row's last, which is loaded byte by byte.
#if defined(__x86_64__) && defined(__GNUC__)
# include <smmintrin.h>
# define FM_HAVE_PX 1

__attribute__((target("sse4.1")))
static inline __m128i fm_px4(const unsigned char *p) {
	int32_t v;
	memcpy(&v, p, 4);
	return _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
}

__attribute__((target("sse4.1")))
static void fm_resample_h_px(unsigned char *dst, int dst_stride, const unsigned char *src, int stride,
		int first, int rows, int c, int ow, const int32_t *start, const int32_t *n, const int32_t *k, int ks, int in_w) {
	const __m128i half = _mm_set1_epi32(1 << (FM_PB - 1));
	for (int y = 0; y < rows; y++) {
		const unsigned char *in = src + (size_t)(first + y) * stride;
		unsigned char *out = dst + (size_t)y * dst_stride;
		for (int xx = 0; xx < ow; xx++) {
			const int32_t *kk = k + (size_t)xx * ks;
			const unsigned char *p = in + (size_t)start[xx] * c;
			int m = n[xx];
			int safe = c == 4 || start[xx] + m < in_w ? m : m - 1;
			__m128i s = half, s2 = _mm_setzero_si128();
			int x = 0;
			for (; x + 1 < safe; x += 2) {
				s = _mm_add_epi32(s, _mm_mullo_epi32(fm_px4(p + x * c), _mm_set1_epi32(kk[x])));
				s2 = _mm_add_epi32(s2, _mm_mullo_epi32(fm_px4(p + (x + 1) * c), _mm_set1_epi32(kk[x + 1])));
			}
			if (x < safe) {
				s = _mm_add_epi32(s, _mm_mullo_epi32(fm_px4(p + x * c), _mm_set1_epi32(kk[x])));
				x++;
			}
			if (x < m) {
				const unsigned char *q = p + x * c;
				s = _mm_add_epi32(s, _mm_mullo_epi32(_mm_setr_epi32(q[0], q[1], q[2], 0), _mm_set1_epi32(kk[x])));
			}
			s = _mm_add_epi32(s, s2);
			int32_t v[4];
			_mm_storeu_si128((__m128i *)v, s);
			unsigned char *o = out + (size_t)xx * c;
			o[0] = fm_clip8(v[0]);
			o[1] = fm_clip8(v[1]);
			o[2] = fm_clip8(v[2]);
			if (c == 4) o[3] = fm_clip8(v[3]);
		}
	}
}

// fm_resample_h_px2 is fm_resample_h_px with AVX2, two rows at a time:
// the rows share the output pixel's taps, so one 8-lane vector holds the
// pixel of both rows, each tap one multiply and one add for both; the
// sums are clipped together (shift, then saturating packs: clip8's
// result). An odd last row goes to fm_resample_h_px.
#include <immintrin.h>
# define FM_HAVE_PX2 1

__attribute__((target("avx2")))
static inline __m256i fm_px4x2(const unsigned char *a, const unsigned char *b) {
	int32_t u, v;
	memcpy(&u, a, 4);
	memcpy(&v, b, 4);
	return _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(u), _mm_cvtsi32_si128(v)));
}

__attribute__((target("avx2")))
static void fm_resample_h_px2(unsigned char *dst, int dst_stride, const unsigned char *src, int stride,
		int first, int rows, int c, int ow, const int32_t *start, const int32_t *n, const int32_t *k, int ks, int in_w) {
	const __m256i half = _mm256_set1_epi32(1 << (FM_PB - 1));
	int y = 0;
	for (; y + 1 < rows; y += 2) {
		const unsigned char *in0 = src + (size_t)(first + y) * stride, *in1 = in0 + stride;
		unsigned char *out0 = dst + (size_t)y * dst_stride, *out1 = out0 + dst_stride;
		for (int xx = 0; xx < ow; xx++) {
			const int32_t *kk = k + (size_t)xx * ks;
			size_t off = (size_t)start[xx] * c;
			const unsigned char *p0 = in0 + off, *p1 = in1 + off;
			int m = n[xx];
			int safe = c == 4 || start[xx] + m < in_w ? m : m - 1;
			__m256i s = half;
			int x = 0;
			for (; x < safe; x++) {
				s = _mm256_add_epi32(s, _mm256_mullo_epi32(fm_px4x2(p0 + x * c, p1 + x * c), _mm256_set1_epi32(kk[x])));
			}
			if (x < m) {
				const unsigned char *q0 = p0 + x * c, *q1 = p1 + x * c;
				__m256i px = _mm256_setr_epi32(q0[0], q0[1], q0[2], 0, q1[0], q1[1], q1[2], 0);
				s = _mm256_add_epi32(s, _mm256_mullo_epi32(px, _mm256_set1_epi32(kk[x])));
			}
			s = _mm256_srai_epi32(s, FM_PB);
			__m128i w = _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
			w = _mm_packus_epi16(w, w);
			uint64_t both = (uint64_t)_mm_cvtsi128_si64(w);
			unsigned char *o0 = out0 + (size_t)xx * c, *o1 = out1 + (size_t)xx * c;
			o0[0] = both;
			o0[1] = both >> 8;
			o0[2] = both >> 16;
			o1[0] = both >> 32;
			o1[1] = both >> 40;
			o1[2] = both >> 48;
			if (c == 4) {
				o0[3] = both >> 24;
				o1[3] = both >> 56;
			}
		}
	}
	if (y < rows) {
		fm_resample_h_px(dst + (size_t)y * dst_stride, dst_stride, src, stride, first + y, 1, c, ow, start, n, k, ks, in_w);
	}
}
#endif

// fm_resample_h: rows [first, first+rows) of src → rows of dst.
FM_CLONES
static void fm_resample_h(unsigned char *dst, int dst_stride, const unsigned char *src, int stride,
		int first, int rows, int c, int ow, const int32_t *start, const int32_t *n, const int32_t *k, int ks, int in_w) {
#ifdef FM_HAVE_PX2
	if ((c == 3 || c == 4) && __builtin_cpu_supports("avx2")) {
		fm_resample_h_px2(dst, dst_stride, src, stride, first, rows, c, ow, start, n, k, ks, in_w);
		return;
	}
#endif
#ifdef FM_HAVE_PX
	if ((c == 3 || c == 4) && __builtin_cpu_supports("sse4.1")) {
		fm_resample_h_px(dst, dst_stride, src, stride, first, rows, c, ow, start, n, k, ks, in_w);
		return;
	}
#endif
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
		(*C.int32_t)(unsafe.Pointer(&k.k[0])), C.int(k.ksize), C.int(k.in))
}

func resampleV(dst []byte, rowBytes int, src []byte, stride, oh int, k *coeffs, acc []int32) {
	if oh == 0 || rowBytes == 0 {
		return
	}
	C.fm_resample_v((*C.uchar)(unsafe.Pointer(&dst[0])), C.int(rowBytes), (*C.uchar)(unsafe.Pointer(&src[0])), C.int(stride), C.int(oh),
		(*C.int32_t)(unsafe.Pointer(&k.start[0])), (*C.int32_t)(unsafe.Pointer(&k.n[0])), (*C.int32_t)(unsafe.Pointer(&k.k[0])), C.int(k.ksize),
		(*C.int32_t)(unsafe.Pointer(&acc[0])))
}
