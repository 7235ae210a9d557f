//go:build unix

package objstore

import (
	"io/fs"
	"syscall"
)

// multiplyLinked tells whether a file may have another name: more than
// one hard link (or an unknown count).
func multiplyLinked(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || uint64(st.Nlink) > 1
}
