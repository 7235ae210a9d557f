package fsm

import (
	"fmt"
)

// MaxKeyBytes bounds a KV key. It is a constant, not a config field, because
// every replica must accept or reject a command identically.
const MaxKeyBytes = 1024

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidCommand)
	}
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes, limit %d", ErrInvalidCommand, len(key), MaxKeyBytes)
	}
	return nil
}
