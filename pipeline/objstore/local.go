package objstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// localFile is an *os.File with its size.
type localFile struct {
	*os.File
	size int64
}

func (f *localFile) Size() int64 { return f.size }

func openLocal(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", name, ErrNotFound)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory", name)
	}
	return &localFile{File: f, size: st.Size()}, nil
}
