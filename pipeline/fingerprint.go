package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"reflect"
)

// specVersion is part of the canonical encoding. Bump it only when the
// meaning of an existing encoding changes; new fields with zero defaults
// leave old fingerprints intact because zero fields are omitted.
const specVersion = 1

// canonicalSpec wraps the normalized spec with the encoding version.
type canonicalSpec struct {
	Version int   `cbor:"feedmesh_spec"`
	Spec    *Spec `cbor:"dataset"`
}

var canonicalEnc = func() cbor.EncMode {
	opts := cbor.CoreDetEncOptions()
	em, err := opts.EncMode()
	if err != nil {
		panic(err) // static options: cannot fail
	}
	return em
}()

var canonicalDec = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		MaxNestedLevels:   32,
		MaxArrayElements:  1 << 16,
		MaxMapPairs:       1 << 16,
		DefaultMapType:    reflect.TypeOf(map[string]any(nil)),
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

// CanonicalEncoding returns the canonical CBOR encoding of the spec
// (RFC 8949 core deterministic: shortest forms, map keys sorted), with all
// defaults filled and args normalized. YAML, JSON and builder specs of the
// same dataset encode identically. The spec must be valid.
func (s *Spec) CanonicalEncoding() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	n, err := s.Normalized()
	if err != nil {
		return nil, err
	}
	b, err := canonicalEnc.Marshal(canonicalSpec{Version: specVersion, Spec: n})
	if err != nil {
		return nil, fmt.Errorf("encode spec: %w", err)
	}
	return b, nil
}

// Fingerprint is the hex SHA-256 of the canonical encoding: the dataset's
// identity, stable across processes, nodes and releases.
func (s *Spec) Fingerprint() (string, error) {
	b, err := s.CanonicalEncoding()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// DecodeCanonical decodes a canonical encoding (as sent between nodes) and
// validates the spec. Decoding is bounded in nesting and sizes.
func DecodeCanonical(b []byte) (*Spec, error) {
	var c canonicalSpec
	if err := canonicalDec.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	if c.Version != specVersion {
		return nil, fmt.Errorf("decode spec: encoding version %d, this build reads %d", c.Version, specVersion)
	}
	if c.Spec == nil {
		return nil, fmt.Errorf("decode spec: no dataset")
	}
	if err := c.Spec.Validate(); err != nil {
		return nil, err
	}
	return c.Spec, nil
}
