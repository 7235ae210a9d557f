//go:build cgo

package fn

// The libjpeg-turbo decoder, through cgo. It is compiled against jpeglib.h
// when the build machine has it (Debian: libjpeg62-turbo-dev; found with
// __has_include, so a machine without it still builds, with the pure-Go
// decoder) and finds the shared library at run time with dlopen (Debian:
// libjpeg62-turbo), so a binary built here runs on a machine without it,
// again with the pure-Go decoder. jpeg_CreateDecompress checks that the
// library's ABI (version, struct size) is the header's.
//
// libjpeg's API, rather than TurboJPEG's, because Debian 12's TurboJPEG is
// 2.1, whose API cannot decode a region (tj3SetCroppingRegion is 3.0's);
// libjpeg-turbo's libjpeg API has jpeg_crop_scanline and
// jpeg_skip_scanlines, and TurboJPEG is a wrapper over it (the same SIMD
// IDCT, upsampling and color conversion).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// -DFM_NO_JPEGLIB (CGO_CFLAGS) builds as a machine without the header.
#if defined(__has_include) && !defined(FM_NO_JPEGLIB)
# if __has_include(<jpeglib.h>) && __has_include(<jerror.h>)
#  include <jpeglib.h>
#  include <jerror.h>
#  define FM_HAVE_JPEGLIB 1
# endif
#endif

enum {
	FM_OK = 0,
	FM_ERR = 1,         // a decode error: the message is in err
	FM_UNSUPPORTED = 2, // a color space this decoder does not convert (CMYK, YCCK): use the pure-Go decoder
	FM_TOO_LARGE = 3,   // width × height over max_pixels
	FM_BAD_REGION = 4,  // the region is not inside the scaled image
};

#define FM_ERRLEN 200
// FM_MAX_SCANS bounds the scans of a progressive JPEG: each is a pass over
// the whole coefficient buffer, so a small file of thousands of tiny scans
// costs minutes (libjpeg-turbo's djpeg -maxscans guards the same way).
#define FM_MAX_SCANS 1000

#ifdef FM_HAVE_JPEGLIB

#if JPEG_LIB_VERSION >= 80
# define FM_SONAME "libjpeg.so.8"
#elif JPEG_LIB_VERSION >= 70
# define FM_SONAME "libjpeg.so.7"
#else
# define FM_SONAME "libjpeg.so.62"
#endif

#define FM_STR2(x) #x
#define FM_STR(x) FM_STR2(x)
#ifdef LIBJPEG_TURBO_VERSION
# define FM_VERSION "libjpeg-turbo " FM_STR(LIBJPEG_TURBO_VERSION)
#else
# define FM_VERSION "libjpeg " FM_STR(JPEG_LIB_VERSION)
#endif

static struct {
	struct jpeg_error_mgr *(*std_error)(struct jpeg_error_mgr *);
	void (*create)(j_decompress_ptr, int, size_t);
	void (*destroy)(j_decompress_ptr);
	void (*abort_)(j_decompress_ptr);
	void (*mem_src)(j_decompress_ptr, const unsigned char *, unsigned long);
	int (*read_header)(j_decompress_ptr, boolean);
	boolean (*start)(j_decompress_ptr);
	JDIMENSION (*read_scanlines)(j_decompress_ptr, JSAMPARRAY, JDIMENSION);
	void (*crop_scanline)(j_decompress_ptr, JDIMENSION *, JDIMENSION *);
	JDIMENSION (*skip_scanlines)(j_decompress_ptr, JDIMENSION);
	boolean (*finish)(j_decompress_ptr);
	void (*calc_output_dimensions)(j_decompress_ptr);
} fm;

static int fm_built(void) { return 1; }
static const char *fm_version(void) { return FM_VERSION " (" FM_SONAME ")"; }

// fm_load opens the library and finds its functions; 0 on success, else
// the reason in err.
static int fm_load(char *err) {
	void *h = dlopen(FM_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, FM_ERRLEN, "%s", dlerror());
		return 1;
	}
#define FM_SYM(field, name) \
	if (!(*(void **)(&fm.field) = dlsym(h, name))) { \
		snprintf(err, FM_ERRLEN, "%s has no %s (not libjpeg-turbo 1.5 or later?)", FM_SONAME, name); \
		return 1; \
	}
	FM_SYM(std_error, "jpeg_std_error");
	FM_SYM(create, "jpeg_CreateDecompress");
	FM_SYM(destroy, "jpeg_destroy_decompress");
	FM_SYM(abort_, "jpeg_abort_decompress");
	FM_SYM(mem_src, "jpeg_mem_src");
	FM_SYM(read_header, "jpeg_read_header");
	FM_SYM(start, "jpeg_start_decompress");
	FM_SYM(read_scanlines, "jpeg_read_scanlines");
	FM_SYM(crop_scanline, "jpeg_crop_scanline");
	FM_SYM(skip_scanlines, "jpeg_skip_scanlines");
	FM_SYM(finish, "jpeg_finish_decompress");
	FM_SYM(calc_output_dimensions, "jpeg_calc_output_dimensions");
#undef FM_SYM
	return 0;
}

typedef struct {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	char *msg;
} fm_err;

static void fm_error_exit(j_common_ptr c) {
	fm_err *e = (fm_err *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

// fm_emit_message: warnings are ignored (as PIL does: extraneous bytes
// before a marker, a corrupt restart marker resynchronised), except the
// two that mean image data is missing, which libjpeg would fill with gray:
// the file ends early (a truncated file), or a scan's data ends at a
// marker before all its blocks (a header claiming more than the data).
static void fm_emit_message(j_common_ptr c, int level) {
	if (level < 0 && (c->err->msg_code == JWRN_JPEG_EOF || c->err->msg_code == JWRN_HIT_MARKER)) {
		fm_err *e = (fm_err *)c->err;
		if (c->err->msg_code == JWRN_JPEG_EOF) {
			snprintf(e->msg, FM_ERRLEN, "truncated JPEG (premature end of the data)");
		} else {
			snprintf(e->msg, FM_ERRLEN, "corrupt or truncated JPEG: a scan's data ends before its last block");
		}
		longjmp(e->jb, 1);
	}
}

static void fm_output_message(j_common_ptr c) { (void)c; }

static void fm_progress(j_common_ptr c) {
	j_decompress_ptr d = (j_decompress_ptr)c;
	if (d->is_decompressor && d->input_scan_number > FM_MAX_SCANS) {
		fm_err *e = (fm_err *)c->err;
		snprintf(e->msg, FM_ERRLEN, "progressive JPEG with over %d scans", FM_MAX_SCANS);
		longjmp(e->jb, 1);
	}
}

// fm_decode decodes buf at scale 1/denom (1, 2, 4 or 8) into out, rows of
// cw*channels bytes: the region [x0, x0+cw) × [y0, y0+ch) of the scaled
// image (cw == 0: the whole scaled image, whose size is then written to
// *cw and *ch). channels: 1 (gray), 3 (RGB) or 4 (RGBA, alpha 255). It
// checks the header's width × height against max_pixels before
// allocating anything for the image, and that out holds out_len bytes.
static int fm_decode(const unsigned char *buf, unsigned long n, int denom, int channels,
		int x0, int y0, int *cw, int *ch, unsigned long max_pixels,
		unsigned char *out, size_t out_len, char *err, int *width, int *height) {
	struct jpeg_decompress_struct d;
	struct jpeg_progress_mgr prog;
	fm_err e;
	JSAMPROW rows[16];
	unsigned char *volatile scratch = NULL;
	volatile int created = 0;
	int rc = FM_ERR;

	memset(&d, 0, sizeof d);
	d.err = fm.std_error(&e.pub);
	e.pub.error_exit = fm_error_exit;
	e.pub.emit_message = fm_emit_message;
	e.pub.output_message = fm_output_message;
	e.msg = err;
	err[0] = 0;
	if (setjmp(e.jb)) {
		if (scratch) free(scratch);
		if (created) fm.destroy(&d);
		return FM_ERR;
	}
	fm.create(&d, JPEG_LIB_VERSION, sizeof d);
	created = 1;
	prog.progress_monitor = fm_progress;
	d.progress = &prog;
	fm.mem_src(&d, buf, n);
	fm.read_header(&d, TRUE);
	*width = d.image_width;
	*height = d.image_height;
	if ((unsigned long long)d.image_width * d.image_height > max_pixels) {
		fm.destroy(&d);
		return FM_TOO_LARGE;
	}
	switch (d.jpeg_color_space) {
	case JCS_GRAYSCALE:
	case JCS_YCbCr:
	case JCS_RGB:
		break;
	default:
		fm.destroy(&d);
		return FM_UNSUPPORTED;
	}
	d.out_color_space = channels == 1 ? JCS_GRAYSCALE : channels == 4 ? JCS_EXT_RGBA : JCS_RGB;
	d.scale_num = 1;
	d.scale_denom = denom;
	fm.calc_output_dimensions(&d);
	int full = *cw == 0;
	if (full) {
		x0 = y0 = 0;
		*cw = d.output_width;
		*ch = d.output_height;
	}
	if (x0 < 0 || y0 < 0 || *cw <= 0 || *ch <= 0 ||
			(unsigned)(x0 + *cw) > d.output_width || (unsigned)(y0 + *ch) > d.output_height) {
		snprintf(err, FM_ERRLEN, "region %dx%d at (%d, %d) is not inside the %ux%u image", *cw, *ch, x0, y0,
			d.output_width, d.output_height);
		fm.destroy(&d);
		return FM_BAD_REGION;
	}
	size_t row = (size_t)*cw * channels;
	if (row * *ch > out_len) {
		snprintf(err, FM_ERRLEN, "output buffer of %zu bytes for %zu", out_len, row * *ch);
		fm.destroy(&d);
		return FM_BAD_REGION;
	}
	fm.start(&d);
	JDIMENSION xoff = x0, w = *cw;
	if (!full && (xoff != 0 || w != d.output_width)) {
		// Widened to iMCU boundaries: read into scratch, keep [x0, x0+cw).
		fm.crop_scanline(&d, &xoff, &w);
		scratch = malloc((size_t)w * channels);
		if (!scratch) {
			snprintf(err, FM_ERRLEN, "out of memory");
			fm.destroy(&d);
			return FM_ERR;
		}
	}
	if (y0 > 0) {
		fm.skip_scanlines(&d, y0);
	}
	int y = 0;
	while (y < *ch) {
		if (scratch) {
			rows[0] = scratch;
			if (fm.read_scanlines(&d, rows, 1) != 1) {
				snprintf(err, FM_ERRLEN, "read no scanline %d", y0 + y);
				goto fail;
			}
			memcpy(out + (size_t)y * row, scratch + (size_t)(x0 - xoff) * channels, row);
			y++;
			continue;
		}
		int k = *ch - y;
		if (k > 16) k = 16;
		for (int i = 0; i < k; i++) rows[i] = out + (size_t)(y + i) * row;
		JDIMENSION got = fm.read_scanlines(&d, rows, k);
		if (got == 0) {
			snprintf(err, FM_ERRLEN, "read no scanline %d", y0 + y);
			goto fail;
		}
		y += got;
	}
	if (full) {
		fm.finish(&d); // reads to EOI: a file cut after its last scanline is caught too
	} else {
		fm.abort_(&d);
	}
	rc = FM_OK;
fail:
	if (scratch) free(scratch);
	fm.destroy(&d);
	return rc;
}

#else // no jpeglib.h at build time

static int fm_built(void) { return 0; }
static const char *fm_version(void) { return ""; }
static int fm_load(char *err) { (void)err; return 1; }
static int fm_decode(const unsigned char *buf, unsigned long n, int denom, int channels,
		int x0, int y0, int *cw, int *ch, unsigned long max_pixels,
		unsigned char *out, size_t out_len, char *err, int *width, int *height) {
	snprintf(err, FM_ERRLEN, "built without jpeglib.h");
	return FM_ERR;
}

#endif
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// turboLoad finds libjpeg-turbo: its description, or why not.
func turboLoad() (string, error) {
	if C.fm_built() == 0 {
		return "", errors.New("built without jpeglib.h (install libjpeg62-turbo-dev and rebuild)")
	}
	var msg [C.FM_ERRLEN]C.char
	if C.fm_load(&msg[0]) != 0 {
		return "", fmt.Errorf("%s (install libjpeg62-turbo)", C.GoString(&msg[0]))
	}
	return C.GoString(C.fm_version()), nil
}

// turboDecode decodes the JPEG b at scale 1/denom into dst (channels 1, 3
// or 4): the region r of the scaled image, or all of it when r is empty.
// It returns the region's size and the image's full, unscaled size.
func turboDecode(b []byte, denom, channels int, r region, maxPixels int64, dst []byte) (w, h, fullW, fullH int, err error) {
	if len(b) == 0 {
		return 0, 0, 0, 0, errors.New("empty data")
	}
	if loadJPEG(); jpegLib.desc == "" { // the library's functions are not there to call
		return 0, 0, 0, 0, errors.New("libjpeg-turbo: " + jpegLib.why)
	}
	var msg [C.FM_ERRLEN]C.char
	cw, ch := C.int(r.w), C.int(r.h)
	var iw, ih C.int
	var out *C.uchar
	if len(dst) > 0 {
		out = (*C.uchar)(unsafe.Pointer(&dst[0]))
	}
	rc := C.fm_decode((*C.uchar)(unsafe.Pointer(&b[0])), C.ulong(len(b)), C.int(denom), C.int(channels),
		C.int(r.x), C.int(r.y), &cw, &ch, C.ulong(maxPixels), out, C.size_t(len(dst)), &msg[0], &iw, &ih)
	switch rc {
	case C.FM_OK:
		return int(cw), int(ch), int(iw), int(ih), nil
	case C.FM_UNSUPPORTED:
		return 0, 0, int(iw), int(ih), errUnsupportedJPEG
	case C.FM_TOO_LARGE:
		return 0, 0, int(iw), int(ih), errTooManyPixels
	}
	return 0, 0, int(iw), int(ih), errors.New(C.GoString(&msg[0]))
}
