package fsm

// putKVBody is the body of TypePutKV, version 1: set Key to Value.
type putKVBody struct {
	Key   string `cbor:"1,keyasint"`
	Value []byte `cbor:"2,keyasint"`
}

// NewPutKV returns a command that sets key to value.
func NewPutKV(key string, value []byte) Command {
	return newCommand(TypePutKV, 1, putKVBody{Key: key, Value: value})
}

// applyPutKV sets the key; the result is nil.
func applyPutKV(s *State, c Command) (any, error) {
	var b putKVBody
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
