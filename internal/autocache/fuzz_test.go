package autocache

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader: any bytes either decode into valid elements or fail with an
// error; nothing panics or allocates beyond what the input can describe.
func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Header{Prefix: fp, Split: 3})
	for i := int64(0); i < 3; i++ {
		w.Add(i, element(i, int(i)*7))
	}
	w.Finish()
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:buf.Len()-3])
	f.Add([]byte("FMAC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := OpenReader(bytes.NewReader(b), int64(len(b)), nil)
		if err != nil {
			return
		}
		for i := 0; ; i++ {
			_, el, err := r.Next()
			if errors.Is(err, io.EOF) {
				if int64(i) != r.Records {
					t.Fatalf("EOF after %d of %d records", i, r.Records)
				}
				return
			}
			if err != nil {
				return
			}
			for j := range el.Tensors {
				if err := el.Tensors[j].Validate(); err != nil {
					t.Fatalf("served an invalid tensor: %v", err)
				}
			}
		}
	})
}
