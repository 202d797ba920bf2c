package order

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"sync"
)

// Blend is a weighted mixture of the data set's files (corpora): every
// epoch is Samples positions, and each position is a record of one file,
// chosen so that the files' shares of the positions follow Weights. Each
// file is read as an endless stream of its own epochs: the q-th position
// a file is given is its record q mod N (of N records) in that file's
// epoch q / N, permuted by the order's seed and that epoch when the order
// shuffles. A file that runs out so starts its next epoch on its own, and
// each file's epochs are exactly once whatever the blend's epochs are.
// Phases change the weights from a position of the run on (a curriculum).
type Blend struct {
	// Weights is each file's weight, in the data set's file order: any
	// non-negative numbers, at least one of them positive.
	Weights []float64
	// Phases are later weights, each from a position of the run (epoch
	// times Samples plus the position in the epoch) on, in increasing
	// order of From, every From above 0.
	Phases []Phase
	// Samples is an epoch's positions; 0 takes the files' records
	// together.
	Samples uint64
}

// Phase is the weights a blend takes from position From of the run on.
type Phase struct {
	From    uint64
	Weights []float64
}

// StepStart is the position of the run where global step step of a run
// in global batches of g starts, epochs of samples positions: its epoch's
// steps are samples/g, and one more under Pad for a partial last one.
func StepStart(step, samples, g uint64, rem Remainder) uint64 {
	per := samples / g
	if rem == Pad && samples%g != 0 {
		per++
	}
	if per == 0 {
		return step * samples
	}
	return step/per*samples + step%per*g
}

// MaxBlendPhases bounds a blend's phases.
const MaxBlendPhases = 1024

// MaxBlendSamples bounds a blend's Samples: sample ids hold 40 bits of a
// file's count of positions.
const MaxBlendSamples = 1 << 40

// weightUnits is what a blend's weights are scaled to before they are
// rounded to integers: the rule is integer arithmetic, the same on every
// machine, and a share is off by at most 2^-40 of the positions.
const weightUnits = 1 << 40

// blendStream is the stream of a blended file's epoch permutations.
const blendStream = 1<<64 - 3

// blender is a Blend made ready: the phases' trees and where each starts.
type blender struct {
	sizes   []uint64
	samples uint64
	phases  []blendPhase
	seed    uint64
	shuffle bool
	sum     string

	mu    sync.Mutex
	perms map[[2]uint64]Permutation // a file and its epoch: the permutation of its records
}

// blendPhase is one phase: its first position of the run, the positions
// each file was given before it, and its tree.
type blendPhase struct {
	from   uint64
	base   []uint64
	nodes  []blendNode // nodes[0] is the root
	single int         // the only file of positive weight, or -1
}

// blendNode splits the positions that reach it between two subtrees:
// left takes a/b of them. A child below 0 is the leaf of file -child-1.
type blendNode struct {
	a, b        uint64
	left, right int
}

func newBlender(b *Blend, sizes []uint64, seed uint64, shuffle bool) (*blender, error) {
	bl := &blender{sizes: sizes, samples: b.Samples, seed: seed, shuffle: shuffle, perms: map[[2]uint64]Permutation{}}
	if len(b.Phases) > MaxBlendPhases {
		return nil, fmt.Errorf("%w: a blend of %d phases, want at most %d", ErrBadOrder, len(b.Phases), MaxBlendPhases)
	}
	var total uint64
	for f, n := range sizes {
		if n == 0 {
			return nil, fmt.Errorf("%w: a blend's file %d holds no record", ErrBadOrder, f)
		}
		total += n
	}
	if bl.samples == 0 {
		bl.samples = total
	}
	if bl.samples > MaxBlendSamples {
		return nil, fmt.Errorf("%w: a blend of %d samples an epoch, want at most %d", ErrBadOrder, bl.samples, uint64(MaxBlendSamples))
	}
	h := sha256.New()
	h.Write(binary.LittleEndian.AppendUint64(nil, bl.samples))
	weights, from := b.Weights, uint64(0)
	for i := 0; i <= len(b.Phases); i++ {
		if i > 0 {
			p := b.Phases[i-1]
			if p.From <= from {
				return nil, fmt.Errorf("%w: a blend's phase %d starts at position %d, not after %d", ErrBadOrder, i, p.From, from)
			}
			weights, from = p.Weights, p.From
		}
		ph, err := newBlendPhase(weights, len(sizes), from)
		if err != nil {
			return nil, fmt.Errorf("%w: phase %d: %w", ErrBadOrder, i, err)
		}
		if i > 0 {
			prev := bl.phases[i-1]
			for f := range sizes {
				ph.base[f] = prev.base[f] + prev.count(f, from-prev.from)
			}
		}
		bl.phases = append(bl.phases, ph)
		h.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, from), uint64(ph.single+1)))
		for _, n := range ph.nodes {
			h.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, n.a), n.b))
		}
	}
	bl.sum = hex.EncodeToString(h.Sum(nil)[:16])
	return bl, nil
}

// newBlendPhase builds the tree of a phase's weights over files.
func newBlendPhase(weights []float64, files int, from uint64) (blendPhase, error) {
	if len(weights) != files {
		return blendPhase{}, fmt.Errorf("%d weights for %d files", len(weights), files)
	}
	var sum float64
	for f, w := range weights {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return blendPhase{}, fmt.Errorf("file %d's weight %v is not a number of at least 0", f, w)
		}
		sum += w
	}
	if sum <= 0 {
		return blendPhase{}, fmt.Errorf("no file has a positive weight")
	}
	var leaves []int
	units := make([]uint64, files)
	for f, w := range weights {
		if w > 0 {
			units[f] = max(1, uint64(math.Round(w/sum*weightUnits)))
			leaves = append(leaves, f)
		}
	}
	ph := blendPhase{from: from, base: make([]uint64, files), single: -1}
	if len(leaves) == 1 {
		ph.single = leaves[0]
		return ph, nil
	}
	ph.build(leaves, units)
	return ph, nil
}

// build adds the subtree of leaves (files in order, of weights units) and
// returns its child index: a leaf, or a node that splits the files where
// their weights are nearest to halves.
func (ph *blendPhase) build(leaves []int, units []uint64) int {
	if len(leaves) == 1 {
		return -leaves[0] - 1
	}
	var total uint64
	for _, f := range leaves {
		total += units[f]
	}
	cut, acc, best := 1, uint64(0), uint64(math.MaxUint64)
	for i, f := range leaves[:len(leaves)-1] {
		acc += units[f]
		if d := max(2*acc, total) - min(2*acc, total); d < best {
			cut, best = i+1, d
		}
	}
	var a uint64
	for _, f := range leaves[:cut] {
		a += units[f]
	}
	at := len(ph.nodes)
	ph.nodes = append(ph.nodes, blendNode{a: a, b: total})
	l := ph.build(leaves[:cut], units)
	r := ph.build(leaves[cut:], units)
	ph.nodes[at].left, ph.nodes[at].right = l, r
	return at
}

// leftOf is how many of a node's first x positions go to its left
// subtree: x*a/b rounded half up, floor((2ax + b) / 2b). It grows by 0 or
// 1 a position, so a position goes left exactly when it grows.
func (n blendNode) leftOf(x uint64) uint64 {
	q, r := x/n.b, x%n.b // a*q + floor((2ar + b) / 2b); 2ar + b < (2b)^2
	hi, lo := bits.Mul64(2*n.a, r)
	lo, c := bits.Add64(lo, n.b, 0)
	hi += c
	d, _ := bits.Div64(hi, lo, 2*n.b)
	return n.a*q + d
}

// count is how many of the phase's first x positions go to file f.
func (ph *blendPhase) count(f int, x uint64) uint64 {
	if ph.single >= 0 {
		return x * b2u(f == ph.single)
	}
	return ph.countFrom(0, f, x)
}

func (ph *blendPhase) countFrom(node, f int, x uint64) uint64 {
	if node < 0 {
		return x * b2u(-node-1 == f)
	}
	n := ph.nodes[node]
	l := n.leftOf(x)
	return ph.countFrom(n.left, f, l) + ph.countFrom(n.right, f, x-l)
}

// at is the file that the phase's position x goes to, and how many of the
// phase's positions before x went to that file.
func (ph *blendPhase) at(x uint64) (file int, q uint64) {
	if ph.single >= 0 {
		return ph.single, x
	}
	node := 0
	for node >= 0 {
		n := ph.nodes[node]
		if l0, l1 := n.leftOf(x), n.leftOf(x+1); l1 > l0 {
			node, x = n.left, l0
		} else {
			node, x = n.right, x-l0
		}
	}
	return -node - 1, x
}

// At is the file that position p of the run goes to, and q: how many
// positions of the run before p went to that file.
func (bl *blender) At(p uint64) (file int, q uint64) {
	i := sort.Search(len(bl.phases), func(i int) bool { return bl.phases[i].from > p }) - 1
	ph := &bl.phases[i]
	f, x := ph.at(p - ph.from)
	return f, ph.base[f] + x
}

// Source is the record that a file's q-th position reads, and the file's
// epoch it is in.
func (bl *blender) Source(file int, q uint64) (record, epoch uint64) {
	n := bl.sizes[file]
	epoch, record = q/n, q%n
	if !bl.shuffle {
		return record, epoch
	}
	key := [2]uint64{uint64(file), epoch}
	bl.mu.Lock()
	p, ok := bl.perms[key]
	if !ok {
		if len(bl.perms) >= 64 {
			clear(bl.perms)
		}
		p = NewPermutation(n, mix(bl.seed, mix(epoch, blendStream-uint64(file))))
		bl.perms[key] = p
	}
	bl.mu.Unlock()
	return p.At(record), epoch
}
