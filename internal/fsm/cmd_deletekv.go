package fsm

// deleteKVBody is the body of TypeDeleteKV, version 1: remove Key (absent is
// not an error).
type deleteKVBody struct {
	Key string `cbor:"1,keyasint"`
}

// NewDeleteKV returns a command that removes key.
func NewDeleteKV(key string) Command {
	return newCommand(TypeDeleteKV, 1, deleteKVBody{Key: key})
}

// applyDeleteKV removes the key; the result is whether it existed (bool).
func applyDeleteKV(s *State, c Command) (any, error) {
	var b deleteKVBody
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
