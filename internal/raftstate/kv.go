package raftstate

import "fmt"

// MaxKeyBytes bounds a KV key. It is a constant, not a config field, because
// every replica must accept or reject a command identically.
const MaxKeyBytes = 1024

// PutKV is the body of TypePutKV, version 1: set Key to Value.
type PutKV struct {
	Key   string `cbor:"1,keyasint"`
	Value []byte `cbor:"2,keyasint"`
}

// DeleteKV is the body of TypeDeleteKV, version 1: remove Key (absent is
// not an error).
type DeleteKV struct {
	Key string `cbor:"1,keyasint"`
}

// NewPutKV returns a command that sets key to value.
func NewPutKV(key string, value []byte) Command {
	return newCommand(TypePutKV, 1, PutKV{Key: key, Value: value})
}

// NewDeleteKV returns a command that removes key.
func NewDeleteKV(key string) Command {
	return newCommand(TypeDeleteKV, 1, DeleteKV{Key: key})
}

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidCommand)
	}
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes, limit %d", ErrInvalidCommand, len(key), MaxKeyBytes)
	}
	return nil
}

// applyPutKV sets the key; the result is nil.
func applyPutKV(s *State, c Command) (any, error) {
	var b PutKV
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkKey(b.Key); err != nil {
		return nil, err
	}
	// Stored values are never nil, so a snapshot round trip (where nil and
	// empty would both come back as empty) leaves the state identical.
	v := make([]byte, len(b.Value))
	copy(v, b.Value)
	s.KV[b.Key] = v
	return nil, nil
}

// applyDeleteKV removes the key; the result is whether it existed (bool).
func applyDeleteKV(s *State, c Command) (any, error) {
	var b DeleteKV
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkKey(b.Key); err != nil {
		return nil, err
	}
	_, existed := s.KV[b.Key]
	delete(s.KV, b.Key)
	return existed, nil
}
