package fsm

// putKVIfAbsentBody is the body of TypePutKVIfAbsent, version 1: set Key to
// Value unless Key is set. The first proposal wins and every later one
// learns the winner: the mesh records each autocache decision this way
// (one per prefix fingerprint), so that every worker of every job follows
// the same decision, whoever profiled first.
type putKVIfAbsentBody struct {
	Key   string `cbor:"1,keyasint"`
	Value []byte `cbor:"2,keyasint"`
}

// NewPutKVIfAbsent returns a command that sets key to value if key is
// absent. Its result is the key's value after the command ([]byte): value
// if it was absent, the value already there otherwise.
func NewPutKVIfAbsent(key string, value []byte) Command {
	return newCommand(TypePutKVIfAbsent, 1, putKVIfAbsentBody{Key: key, Value: value})
}

func applyPutKVIfAbsent(s *State, c Command) (any, error) {
	var b putKVIfAbsentBody
	if err := decodeBody(c, &b); err != nil {
		return nil, err
	}
	if err := checkKey(b.Key); err != nil {
		return nil, err
	}
	if v, ok := s.KV[b.Key]; ok {
		return append([]byte(nil), v...), nil
	}
	v := append([]byte{}, b.Value...)
	s.KV[b.Key] = v
	return append([]byte(nil), v...), nil
}
