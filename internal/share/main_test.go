package share

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// item is a test item: its production sequence number and size.
type item struct {
	seq  int64
	size int64
}

func (i item) Size() int64 { return i.size }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
