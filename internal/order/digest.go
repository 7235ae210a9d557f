package order

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
)

// Digest is an order-independent digest of a multiset of element ids:
// the count and four 64-bit lanes, each the sum (mod 2^64) of a keyed
// hash of every id. Adding is commutative and associative, so a
// consumer's digest of what it received equals the sum of the digests of
// the windows the nodes produced for it, whatever the order and the
// batching, and the digests of an epoch's consumers add up to the
// epoch's. A dropped element changes Count and every lane; a dropped
// element and a duplicated one leave Count alone but change the lanes
// (a XOR would cancel the duplicate). The hash is keyed per (job, epoch)
// but not cryptographic: it catches loss and repetition by accident, not
// a forger.
type Digest struct {
	Count uint64
	Sum   [4]uint64
}

// DigestKey is the key of an epoch's digests, from the job's audit seed.
func DigestKey(seed, epoch uint64) uint64 { return Key(seed, labelDigest, epoch) }

var laneSalt = [4]uint64{0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0, 0x082efa98ec4e6c89}

// Add adds element id of source (0 for a dataset without mixture).
func (d *Digest) Add(key uint64, source int, id uint64) {
	h := mix64(id ^ mix64(key^uint64(source)*0x9e3779b97f4a7c15))
	d.Count++
	for l := range d.Sum {
		d.Sum[l] += mix64(h ^ laneSalt[l] ^ key)
	}
}

// Plus is the digest of the union (as multisets) of d's and o's.
func (d Digest) Plus(o Digest) Digest {
	r := Digest{Count: d.Count + o.Count}
	for l := range r.Sum {
		r.Sum[l] = d.Sum[l] + o.Sum[l]
	}
	return r
}

// DigestLen is the size of a marshalled Digest.
const DigestLen = 40

// MarshalBinary is the 40-byte little-endian encoding.
func (d Digest) MarshalBinary() ([]byte, error) {
	b := make([]byte, DigestLen)
	binary.LittleEndian.PutUint64(b, d.Count)
	for l, s := range d.Sum {
		binary.LittleEndian.PutUint64(b[8+8*l:], s)
	}
	return b, nil
}

// UnmarshalBinary decodes MarshalBinary's encoding.
func (d *Digest) UnmarshalBinary(b []byte) error {
	if len(b) != DigestLen {
		return errors.New("order: a digest is 40 bytes")
	}
	d.Count = binary.LittleEndian.Uint64(b)
	for l := range d.Sum {
		d.Sum[l] = binary.LittleEndian.Uint64(b[8+8*l:])
	}
	return nil
}

// String is the hex of MarshalBinary.
func (d Digest) String() string {
	b, _ := d.MarshalBinary()
	return hex.EncodeToString(b)
}
