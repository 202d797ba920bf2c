package order

import (
	"math/bits"
	"math/rand/v2"
)

// Permutation is a keyed bijection on [0, N): a pseudo-random permutation
// of N positions computed one position at a time, in constant time and
// memory, with no table of N entries. It is a balanced Feistel network on
// the smallest domain of 2^(2h) positions that holds N (so at most 4N),
// walked in cycles until the result falls inside [0, N): the network is a
// bijection of its domain, so following x's cycle until it comes back into
// [0, N) is a bijection of [0, N) (Black and Rogaway's cycle walking), and
// takes fewer than four steps on average.
//
// The round function is splitmix64 of the right half xored with a round
// key, masked to h bits; eight rounds (four make a pseudo-random
// permutation from pseudo-random round functions, by Luby and Rackoff;
// four more are a margin for a round function that is only a good mixer).
//
// A Feistel network only makes even permutations of its domain, and on a
// domain of a few positions that shows through the cycle walk (over n = 5,
// some orders come out twice as often as others). Up to smallPermutation
// positions the permutation is therefore a table, made by the
// Fisher-Yates shuffle from a generator keyed alike: exactly uniform, and
// at most smallPermutation entries whatever the data set's size.
// docs/determinism.md says why a Feistel network and not an index array
// or a linear congruential walk.
type Permutation struct {
	n     uint64
	half  uint   // h: bits of each half
	mask  uint64 // 2^h - 1
	keys  [feistelRounds]uint64
	table []uint32 // n <= smallPermutation: the permutation itself
}

// feistelRounds is the Feistel network's rounds.
const feistelRounds = 8

// smallPermutation is the largest n whose permutation is a table.
const smallPermutation = 4096

// NewPermutation is the permutation of [0, n) keyed by key.
func NewPermutation(n, key uint64) Permutation {
	p := Permutation{n: n}
	if n <= smallPermutation {
		p.table = make([]uint32, n)
		rng := rand.New(rand.NewPCG(key, smallPermutation))
		for i := range p.table {
			k := rng.IntN(i + 1)
			p.table[i], p.table[k] = p.table[k], uint32(i)
		}
		return p
	}
	width := uint(2)
	if n > 1 {
		width = uint(bits.Len64(n - 1)) // positions 0..n-1 fit in width bits
	}
	width += width & 1 // an even width: balanced halves
	p.half = max(width/2, 1)
	p.mask = 1<<p.half - 1
	for i := range p.keys {
		p.keys[i] = mix(key, uint64(i))
	}
	return p
}

// Len is N.
func (p Permutation) Len() uint64 { return p.n }

// At is the position x maps to, x < N.
func (p Permutation) At(x uint64) uint64 {
	if p.table != nil {
		return uint64(p.table[x])
	}
	for {
		x = p.round(x)
		if x < p.n {
			return x
		}
	}
}

// round is one pass of the Feistel network over the whole domain.
func (p Permutation) round(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for _, k := range p.keys {
		l, r = r, l^(splitmix(r^k)&p.mask)
	}
	return l<<p.half | r
}
