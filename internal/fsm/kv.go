package fsm

import (
	"fmt"
)

// maxKeyBytes bounds a KV key. It is a constant, not a config field, because
// every replica must accept or reject a command identically.
const maxKeyBytes = 1024

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidCommand)
	}
	if len(key) > maxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes, limit %d", ErrInvalidCommand, len(key), maxKeyBytes)
	}
	return nil
}
