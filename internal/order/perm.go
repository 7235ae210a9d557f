package order

import (
	"errors"
	"math/bits"
)

// mix64 is SplitMix64's finalizer: a bijection of uint64 whose output
// bits each depend on every input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Key derives a 64-bit key from a seed and a path of labels (epoch,
// window, source, purpose…): Key(seed, a, b) and Key(seed, b, a) differ,
// and so do keys of different path lengths.
func Key(seed uint64, path ...uint64) uint64 {
	k := mix64(seed ^ 0x6a09e667f3bcc909)
	for i, p := range path {
		k = mix64(k ^ mix64(p+uint64(i+1)*0x9e3779b97f4a7c15))
	}
	return k
}

// Key labels: the purposes a key is derived for, so that two uses of
// one (seed, epoch) never share a stream.
const (
	labelBlocks  = 0xb10c
	labelWindow  = 0x3d0f
	labelMix     = 0x313e
	labelDigest  = 0xd16e
	labelFeistel = 0xfe15
)

// PermRounds is the number of Feistel rounds. Four rounds of a
// pseudorandom function make a pseudorandom permutation (Luby–Rackoff);
// six leave margin against the round function's weakness.
const PermRounds = 6

// MaxPermSize bounds n: 2^62, so the Feistel domain (< 2n) and sums of
// positions fit 64 bits.
const MaxPermSize = 1 << 62

// ErrPermSize: a permutation of 0 or more than MaxPermSize elements.
var ErrPermSize = errors.New("order: permutation size must be in [1, 2^62]")

// Perm is a seeded pseudorandom bijection of [0, n): a Feistel network
// over the w = bits(n-1) bits that hold n-1 (at least 2), cut into a
// high half of w/2 bits and a low half of the rest, whose rounds
// alternately XOR a keyed hash of one half into the other (an unbalanced,
// alternating Feistel, so w need not be even), with cycle walking to stay
// inside [0, n): the domain 2^w is under 2n, so the expected cost is under
// 2 network evaluations whatever n. Nothing is materialized: At and Inv
// are O(1) in n. The zero Perm is not usable; build one with NewPerm.
type Perm struct {
	n      uint64
	lo     uint // bits of the low half
	hiMask uint64
	loMask uint64
	keys   [PermRounds]uint64
}

// NewPerm returns the permutation of [0, n) that key selects.
func NewPerm(n, key uint64) (Perm, error) {
	if n == 0 || n > MaxPermSize {
		return Perm{}, ErrPermSize
	}
	w := uint(bits.Len64(n - 1)) // bits to hold n-1
	if w < 2 {
		w = 2
	}
	hi := w / 2
	lo := w - hi
	p := Perm{n: n, lo: lo, hiMask: 1<<hi - 1, loMask: 1<<lo - 1}
	k := mix64(key ^ labelFeistel)
	for r := range p.keys {
		p.keys[r] = mix64(k + uint64(r+1)*0x9e3779b97f4a7c15)
	}
	return p, nil
}

// Len is n.
func (p Perm) Len() uint64 { return p.n }

// step applies round r to (h, l): even rounds change the high half from
// the low one, odd rounds the low half from the high one. Each round is
// its own inverse.
func (p Perm) step(r int, h, l uint64) (uint64, uint64) {
	if r%2 == 0 {
		return h ^ mix64(l^p.keys[r])&p.hiMask, l
	}
	return h, l ^ mix64(h^p.keys[r])&p.loMask
}

func (p Perm) enc(x uint64) uint64 {
	h, l := x>>p.lo, x&p.loMask
	for r := range PermRounds {
		h, l = p.step(r, h, l)
	}
	return h<<p.lo | l
}

func (p Perm) dec(x uint64) uint64 {
	h, l := x>>p.lo, x&p.loMask
	for r := PermRounds - 1; r >= 0; r-- {
		h, l = p.step(r, h, l)
	}
	return h<<p.lo | l
}

// At is the image of i (i < n; larger i are reduced mod n).
func (p Perm) At(i uint64) uint64 {
	if p.n <= 1 {
		return 0
	}
	x := i % p.n
	for {
		x = p.enc(x)
		if x < p.n {
			return x
		}
	}
}

// Inv is the preimage of j: At(Inv(j)) == j.
func (p Perm) Inv(j uint64) uint64 {
	if p.n <= 1 {
		return 0
	}
	x := j % p.n
	for {
		x = p.dec(x)
		if x < p.n {
			return x
		}
	}
}
