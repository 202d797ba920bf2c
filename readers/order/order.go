package order

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

// Errors of this package.
var (
	// ErrBadOrder is returned for an order that cannot be built: no
	// records, a window or shard out of range.
	ErrBadOrder = errors.New("order: invalid order")
)

// MaxWindow bounds Window: a window is held in memory while it is permuted.
const MaxWindow = 1 << 26

// Split is a run of records of one file that is read sequentially: a
// RecordIO chunk, or a run of records of a format that seeks to any record.
type Split struct {
	File  int
	First uint64 // the first record's index in its file
	Count uint64
}

// Remainder says what happens to the positions left over when an epoch's
// positions do not divide evenly among the ranks.
type Remainder uint8

const (
	// Drop gives every rank floor(T/World) positions; the last T mod World
	// positions are not delivered in this epoch (DistributedSampler's
	// drop_last).
	Drop Remainder = iota
	// Pad gives every rank ceil(T/World) positions; the positions past the
	// end repeat the first ones, and are marked as padding so that a
	// trainer can mask them.
	Pad
)

func (r Remainder) String() string {
	if r == Pad {
		return "pad"
	}
	return "drop"
}

// ParseRemainder parses "drop" or "pad".
func ParseRemainder(s string) (Remainder, error) {
	switch s {
	case "drop", "":
		return Drop, nil
	case "pad":
		return Pad, nil
	}
	return 0, fmt.Errorf("%w: remainder %q: want drop or pad", ErrBadOrder, s)
}

// Config is what an order is a function of, besides the data set and the
// epoch.
type Config struct {
	Seed uint64
	// Shuffle permutes the splits; without it they keep the data set's
	// order.
	Shuffle bool
	// Window is how many records are permuted together; 0 or 1 permutes
	// none.
	Window int
	// Global permutes all the records of the data set together, each epoch
	// by a Permutation keyed by the seed and the epoch (Window must be 0 or
	// 1, and Shuffle is implied). The records are then read by position:
	// the order's pieces are runs of positions of one virtual file, index
	// Files, whose record g is G position g (see Epoch.At).
	Global bool
	// Files is the data set's number of files: the virtual file's index
	// under Global.
	Files int
	// Block is the window, in records, of an order that permutes no
	// record (Window 0 or 1, or Global): the positions the order is
	// assembled in. 0 is the constant Block; a data set of large records
	// takes fewer, so that a block's records fit a bound in bytes.
	Block int
	// Blend, when not nil, makes every epoch a weighted mixture of the
	// files (blend.go). Its positions are read as a global order's are,
	// from the virtual file (Global is implied, Window must be 0 or 1),
	// and Shuffle, not Global, says whether each file's epochs are
	// permuted.
	Blend *Blend
}

// Order is the order function over one data set: its splits, the seed and
// the window. It is safe for concurrent use.
type Order struct {
	splits  []Split
	n       uint64
	seed    uint64
	shuffle bool
	permute bool   // the window's records are permuted (Window > 1)
	window  uint64 // Window, or the block when no record is permuted
	global  bool
	virtual int      // under global, the virtual file's index
	starts  []uint64 // under global, each split's first data set position
	blend   *blender // under Blend
}

// Block is the window, in records, of an order that permutes no record:
// the unit in which a pipeline reads and hands on its share.
const Block = 4096

// New returns the order over splits (in the data set's own order: files in
// list order, splits in file order).
func New(splits []Split, c Config) (*Order, error) {
	switch {
	case c.Window < 0 || c.Window > MaxWindow:
		return nil, fmt.Errorf("%w: window %d, want 0 to %d", ErrBadOrder, c.Window, MaxWindow)
	case c.Global && c.Window > 1:
		return nil, fmt.Errorf("%w: a global order has no window (window %d)", ErrBadOrder, c.Window)
	case c.Block < 0 || c.Block > Block:
		return nil, fmt.Errorf("%w: block %d, want 0 to %d", ErrBadOrder, c.Block, Block)
	case c.Global && c.Files < 0:
		return nil, fmt.Errorf("%w: %d files", ErrBadOrder, c.Files)
	case c.Blend != nil && c.Window > 1:
		return nil, fmt.Errorf("%w: a blend has no window (window %d)", ErrBadOrder, c.Window)
	}
	if c.Blend != nil {
		return newBlended(splits, c)
	}
	o := &Order{splits: slices.Clone(splits), seed: c.Seed, shuffle: c.Shuffle || c.Global, permute: c.Window > 1,
		window: uint64(c.Window), global: c.Global, virtual: c.Files}
	if !o.permute {
		o.window = Block
		if c.Block > 0 {
			o.window = uint64(c.Block)
		}
	}
	if o.global {
		o.starts = make([]uint64, len(splits))
	}
	for i, s := range splits {
		if o.n+s.Count < o.n {
			return nil, fmt.Errorf("%w: more than 2^64 records", ErrBadOrder)
		}
		if o.global {
			o.starts[i] = o.n
		}
		o.n += s.Count
	}
	return o, nil
}

// newBlended is the order of a blend of the files of splits.
func newBlended(splits []Split, c Config) (*Order, error) {
	sizes := make([]uint64, c.Files)
	for _, s := range splits {
		if s.File < 0 || s.File >= c.Files {
			return nil, fmt.Errorf("%w: a split of file %d of %d", ErrBadOrder, s.File, c.Files)
		}
		sizes[s.File] += s.Count
	}
	bl, err := newBlender(c.Blend, sizes, c.Seed, c.Shuffle)
	if err != nil {
		return nil, err
	}
	o := &Order{splits: slices.Clone(splits), seed: c.Seed, shuffle: c.Shuffle, window: Block, global: true,
		virtual: c.Files, blend: bl, n: bl.samples}
	if c.Block > 0 {
		o.window = uint64(c.Block)
	}
	return o, nil
}

// Global reports whether the order's pieces read the virtual file by
// position (Config.Global, or a Blend).
func (o *Order) Global() bool { return o.global }

// Blended is the sum that identifies the order's blend (its positions an
// epoch, phases and weights as the rule takes them), or "" without one.
func (o *Order) Blended() string {
	if o.blend == nil {
		return ""
	}
	return o.blend.sum
}

// Virtual is the index of the virtual file a global order's pieces read:
// Config.Files.
func (o *Order) Virtual() int { return o.virtual }

// locate is the file and record at data set position s, under global.
func (o *Order) locate(s uint64) (file int, record uint64) {
	i := sort.Search(len(o.starts), func(i int) bool { return o.starts[i]+o.splits[i].Count > s })
	sp := o.splits[i]
	return sp.File, sp.First + (s - o.starts[i])
}

// Len is the number of records in the data set: the positions of an epoch.
func (o *Order) Len() uint64 { return o.n }

// Window is the window of the record permutation; 1 permutes none.
func (o *Order) Window() int {
	if !o.permute {
		return 1
	}
	return int(o.window)
}

// Span is how many positions a window spans: Window, or Block when no
// record is permuted.
func (o *Order) Span() int { return int(o.window) }

// Seed is the order's seed.
func (o *Order) Seed() uint64 { return o.seed }

// Splits is the number of splits: the pieces of work readers share. A
// global order's are its blocks of Block positions, which any reader reads
// by position, however few files hold them.
func (o *Order) Splits() int {
	if o.global {
		return int((o.n + o.window - 1) / o.window)
	}
	return len(o.splits)
}

// mix derives a generator stream from (a, b): splitmix64 of each, so that
// nearby epochs and windows get unrelated streams.
func mix(a, b uint64) uint64 { return splitmix(splitmix(a) ^ b) }

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// splitStream is the stream of the split permutation; windows use theirs.
const splitStream = 1<<64 - 1

// Epoch is epoch e of the order: the split permutation, and where each
// permuted split starts in S.
type Epoch struct {
	o      *Order
	e      uint64
	perm   []int    // S's splits, as indices into o.splits
	starts []uint64 // S position of each of perm's splits
	global Permutation
}

// globalStream is the stream of a global order's permutation.
const globalStream = 1<<64 - 2

// Epoch computes epoch e's split permutation, or, of a global order, its
// Permutation's keys.
func (o *Order) Epoch(e uint64) *Epoch {
	if o.blend != nil {
		return &Epoch{o: o, e: e}
	}
	if o.global {
		return &Epoch{o: o, e: e, global: NewPermutation(o.n, mix(o.seed, mix(e, globalStream)))}
	}
	ep := &Epoch{o: o, e: e, perm: make([]int, len(o.splits)), starts: make([]uint64, len(o.splits))}
	for i := range ep.perm {
		ep.perm[i] = i
	}
	if o.shuffle {
		rng := rand.New(rand.NewPCG(o.seed, mix(e, splitStream)))
		rng.Shuffle(len(ep.perm), func(i, j int) { ep.perm[i], ep.perm[j] = ep.perm[j], ep.perm[i] })
	}
	var at uint64
	for i, s := range ep.perm {
		ep.starts[i] = at
		at += o.splits[s].Count
	}
	return ep
}

// Number is the epoch's number.
func (ep *Epoch) Number() uint64 { return ep.e }

// windowLen is how many positions window j holds (the last may be short).
func (ep *Epoch) windowLen(j uint64) int {
	lo := j * ep.o.window
	return int(min(ep.o.window, ep.o.n-lo))
}

// Perm is window j's permutation: G position j*Window+i is S position
// j*Window+Perm(j)[i].
func (ep *Epoch) Perm(j uint64) []int { return ep.PermInto(j, nil) }

// PermInto is Perm in buf's storage when it is large enough.
func (ep *Epoch) PermInto(j uint64, buf []int) []int {
	n := ep.windowLen(j)
	if cap(buf) < n {
		buf = make([]int, n)
	}
	p := buf[:n]
	for i := range p {
		p[i] = i
	}
	if n > 1 && ep.o.permute {
		// As rand.Perm does, so that the permutation is the same.
		rng := rand.New(rand.NewPCG(ep.o.seed, mix(ep.e, j)))
		for i := range p {
			k := rng.IntN(i + 1)
			p[i], p[k] = p[k], i
		}
	}
	return p
}

// Piece is a run of records of one file, read sequentially: the part of a
// split that falls in one window.
type Piece struct {
	File     int
	From, To uint64 // records [From, To) of the file
	Pos      uint64 // the S position of record From
}

// Pieces are the pieces that make up S positions [lo, hi), in S order.
func (ep *Epoch) Pieces(lo, hi uint64) []Piece {
	var out []Piece
	for lo < hi {
		p := ep.PieceAt(lo, hi)
		out = append(out, p)
		lo = p.Pos + (p.To - p.From)
	}
	return out
}

// PieceAt is the first piece of S positions [lo, hi), lo < hi <= Len: the
// records from lo to the end of its split or to hi.
func (ep *Epoch) PieceAt(lo, hi uint64) Piece {
	if ep.o.global { // the virtual file's records, to the end of their block
		b := min(hi, (lo/ep.o.window+1)*ep.o.window)
		return Piece{File: ep.o.virtual, From: lo, To: b, Pos: lo}
	}
	i := sort.Search(len(ep.starts), func(i int) bool { return ep.starts[i]+ep.o.splits[ep.perm[i]].Count > lo })
	s := ep.o.splits[ep.perm[i]]
	b := min(hi, ep.starts[i]+s.Count)
	return Piece{File: s.File, From: s.First + (lo - ep.starts[i]), To: s.First + (b - ep.starts[i]), Pos: lo}
}

// At is the record at G position g: its file and record (of a global
// order, the data set's file, not the virtual one its pieces read). Of a
// blend, the record is the file's count of positions before g in the run,
// which names a record of one of the file's epochs once (Source reads it).
func (ep *Epoch) At(g uint64) (file int, record uint64) {
	if bl := ep.o.blend; bl != nil {
		return bl.At(ep.e*ep.o.n + g)
	}
	if ep.o.global {
		return ep.o.locate(ep.global.At(g))
	}
	j := g / ep.o.window
	s := j*ep.o.window + uint64(ep.Perm(j)[g-j*ep.o.window])
	p := ep.Pieces(s, s+1)[0]
	return p.File, p.From
}

// BlendSource is the record that file reads for its q-th position in a
// blend (the record that At returns), and the file's epoch that record
// is read in. Without a blend a file has no epochs of its own, and
// BlendSource returns q and 0.
func (o *Order) BlendSource(file int, q uint64) (record, epoch uint64) {
	if o.blend == nil {
		return q, 0
	}
	return o.blend.Source(file, q)
}

// Source is the record that G position g reads: its file, its record and
// the epoch of the file it is read in. Only a blend's files have epochs of
// their own; the others are read in the order's epoch.
func (ep *Epoch) Source(g uint64) (file int, record, epoch uint64) {
	file, record = ep.At(g)
	if bl := ep.o.blend; bl != nil {
		record, epoch = bl.Source(file, record)
		return file, record, epoch
	}
	return file, record, ep.e
}

// Records calls f with the file and record of each G position of r, in
// order, permuting each window once (At permutes one per call).
func (ep *Epoch) Records(r Range, f func(file int, record uint64)) {
	if ep.o.global {
		for g := r.Lo; g < r.Hi; g++ {
			f(ep.At(g))
		}
		return
	}
	var perm []int
	w, cur := ep.o.window, ^uint64(0)
	for g := r.Lo; g < r.Hi; g++ {
		if j := g / w; j != cur {
			perm, cur = ep.PermInto(j, perm), j
		}
		s := cur*w + uint64(perm[g-cur*w])
		p := ep.PieceAt(s, s+1)
		f(p.File, p.From)
	}
}
