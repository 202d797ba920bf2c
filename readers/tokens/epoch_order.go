package tokens

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/actorfeed/actorfeed/readers/order"
)

// DocumentGroup is how many consecutive sequences an epoch's document order
// keeps together: the groups are permuted, and the sequences inside each
// group, so that the memory an epoch's order takes is 8 bytes a group.
const DocumentGroup = 64

// EpochOrder is the order an epoch packs an indexed dataset's sequences
// in: its groups of DocumentGroup consecutive sequences in the order of a
// permutation keyed by (seed, epoch), and the sequences of each group in
// the order of a permutation of their own. Megatron-LM's GPTDataset
// shuffles single documents before it packs each epoch, which takes an
// index of every document; this order gives a document new neighbours
// every epoch (a random member of its group, or at a group's edge a random
// group) in an index of one entry for DocumentGroup of them
// (docs/tokens.md).
type EpochOrder struct {
	x      *Indexed
	key    uint64
	groups order.Permutation
	starts []uint64 // the epoch's stream offset of each permuted group, and the end
}

// EpochOrder is the document order of epoch under seed.
func (x *Indexed) EpochOrder(seed, epoch uint64) *EpochOrder {
	key := mix(mix(seed, 0x746f6b656e73), epoch) // "tokens": apart from the sample order's keys
	groups := len(x.groupFirst) - 1
	o := &EpochOrder{x: x, key: key, groups: order.NewPermutation(uint64(groups), key)}
	o.starts = make([]uint64, groups+1)
	for j := range groups {
		g := o.groups.At(uint64(j))
		o.starts[j+1] = o.starts[j] + x.groupFirst[g+1] - x.groupFirst[g]
	}
	return o
}

func mix(a, b uint64) uint64 {
	x := a ^ (b + 0x9e3779b97f4a7c15 + a<<6 + a>>2)
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// run is a piece of the epoch's stream: tokens [from, from+n) of the
// corpus, and whether a sequence starts at from.
type run struct {
	from, n uint64
	start   bool
}

// group is the permuted group at place j of the epoch: its sequences'
// runs in the group's order, in runs. It reads the group's lengths only:
// the opening checked that every sequence starts where the ones before it
// end, so their offsets are the lengths' running sum from the group's
// first token.
func (o *EpochOrder) group(j uint64, runs *[DocumentGroup]run) ([]run, error) {
	g := o.groups.At(j)
	first := g * DocumentGroup
	n := min(DocumentGroup, o.x.sequences-first)
	h := indexHeader{sequences: o.x.sequences}
	var lengths [4 * DocumentGroup]byte
	if err := o.x.readIndex(lengths[:4*n], h.lengthsAt()+4*int64(first)); err != nil {
		return nil, err
	}
	var from [DocumentGroup]uint64
	for k, at := 0, o.x.groupFirst[g]; k < int(n); k++ {
		from[k] = at
		at += uint64(binary.LittleEndian.Uint32(lengths[4*k:]))
	}
	// rand.Perm's permutation, made in place: it is part of every saved
	// state (TestEpochOrderIsPinned).
	var at [DocumentGroup]int
	perm := at[:n]
	for k := range perm {
		perm[k] = k
	}
	rand.New(rand.NewPCG(o.key, g)).Shuffle(len(perm), func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
	out := runs[:0]
	for _, k := range perm {
		length := uint64(binary.LittleEndian.Uint32(lengths[4*k:]))
		if length > 0 {
			out = append(out, run{from: from[k], n: length, start: true})
		}
	}
	return out, nil
}

// Sample reads packed sample i of the epoch (tokens [i*N, i*N+N+1) of its
// stream, N = len(tokens)-1) and its positions, as tokens.Sample does for
// the corpus's own order.
func (o *EpochOrder) Sample(i uint64, tokens, positions []int64) error {
	seqLen := len(tokens) - 1
	if seqLen < 1 || len(positions) != len(tokens) {
		return fmt.Errorf("tokens: a sample of %d tokens and %d positions", len(tokens), len(positions))
	}
	if i >= Samples(o.x, seqLen) {
		return fmt.Errorf("tokens: %s: no sample %d of %d at %d tokens", o.x.Name(), i, Samples(o.x, seqLen), seqLen)
	}
	at := i * uint64(seqLen) // in the epoch's stream
	j := uint64(sort.Search(len(o.starts)-1, func(j int) bool { return o.starts[j+1] > at }))
	skip := at - o.starts[j]
	filled := 0
	var buf [DocumentGroup]run
	for filled < len(tokens) {
		if j >= uint64(len(o.starts)-1) {
			return fmt.Errorf("tokens: %s: sample %d runs past the corpus's %d tokens", o.x.Name(), i, o.x.tokens)
		}
		runs, err := o.group(j, &buf)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if skip >= r.n {
				skip -= r.n
				continue
			}
			r.from, r.n, r.start = r.from+skip, r.n-skip, r.start && skip == 0
			skip = 0
			if filled, err = o.fill(r, tokens, positions, filled); err != nil || filled == len(tokens) {
				return err
			}
		}
		j++
	}
	return nil
}

// fill reads run r into tokens and positions from filled on, and returns
// how many are filled.
func (o *EpochOrder) fill(r run, tokens, positions []int64, filled int) (int, error) {
	n := min(int(r.n), len(tokens)-filled)
	if err := o.x.ReadTokens(tokens[filled:filled+n], r.from); err != nil {
		return filled, err
	}
	p := int64(0)
	if filled > 0 && !r.start {
		p = positions[filled-1] + 1
	}
	if filled > 0 && r.start {
		p = 0
	}
	for k := range n {
		positions[filled+k] = p
		p++
	}
	return filled + n, nil
}
