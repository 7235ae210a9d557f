//go:build !cgo

package fn

// Without cgo the resampling passes are resample_go.go's.

func resampleH(dst []byte, dstStride int, src []byte, stride, first, rows, c int, k *coeffs) {
	resampleHGo(dst, dstStride, src, stride, first, rows, c, k)
}

func resampleV(dst []byte, rowBytes int, src []byte, stride, oh int, k *coeffs, acc []int32) {
	resampleVGo(dst, rowBytes, src, stride, oh, k, acc)
}
