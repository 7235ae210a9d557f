//go:build !cgo

package fn

import "errors"

// Without cgo there is no libjpeg-turbo: JPEGs go through image/jpeg.

func turboLoad() (string, error) {
	return "", errors.New("built without cgo (CGO_ENABLED=0)")
}

func turboDecode(b []byte, denom, channels int, r region, maxPixels int64, dst []byte) (w, h, fullW, fullH int, err error) {
	return 0, 0, 0, 0, errors.New("libjpeg-turbo: built without cgo")
}
