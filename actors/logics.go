package actors

import (
	"fmt"
	"math/rand/v2"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// instance is one sample and its id, cut from an item without copying.
type instance struct {
	part *messages.Part
	id   uint64
}

// split cuts an item into its instances (views of its storage).
func split(b *messages.Batch) ([]instance, error) {
	parts, err := b.SplitParts()
	if err != nil {
		return nil, err
	}
	out := make([]instance, len(parts))
	for i, p := range parts {
		out[i] = instance{part: p, id: b.Ids[i]}
	}
	return out, nil
}

// regroup makes one item of the given pass from instances, still in their
// own storage.
func regroup(pass uint32, insts []instance) *messages.Batch {
	b := &messages.Batch{Pass: pass, Parts: make([]*messages.Part, len(insts)), Ids: make([]uint64, len(insts))}
	for i, in := range insts {
		b.Parts[i], b.Ids[i] = in.part, in.id
	}
	return b
}

// ---- shuffle ----

// shuffleLogic is create_shuffle_reader: it fills a window of instances,
// shuffles it with a PCG generator seeded (seed, pass) and hands it out in
// groups before filling the next. Windows never mix, and the order equals
// readers.Shuffle's for the same seed and pass.
type shuffleLogic struct {
	window, group int
	seed          uint64
	pass          uint32
	rng           *rand.Rand
	buf           []instance
}

func (s *shuffleLogic) start(pass uint32) {
	s.pass, s.buf = pass, nil
	s.rng = rand.New(rand.NewPCG(s.seed, uint64(pass)))
}

func (s *shuffleLogic) upstreamPass(pass uint32) uint32 { return pass }

func (s *shuffleLogic) take(b *messages.Batch) ([]*messages.Batch, error) {
	insts, err := split(b)
	if err != nil {
		return nil, err
	}
	if s.window <= 1 {
		return s.emit(insts), nil
	}
	var out []*messages.Batch
	for len(insts) > 0 {
		n := min(len(insts), s.window-len(s.buf))
		s.buf = append(s.buf, insts[:n]...)
		insts = insts[n:]
		if len(s.buf) == s.window {
			out = append(out, s.drain()...)
		}
	}
	return out, nil
}

// drain shuffles the window and hands it on; the window's buffer is reused
// (the items emitted copy what they hold).
func (s *shuffleLogic) drain() []*messages.Batch {
	s.rng.Shuffle(len(s.buf), func(i, j int) { s.buf[i], s.buf[j] = s.buf[j], s.buf[i] })
	out := s.emit(s.buf)
	s.buf = s.buf[:0]
	return out
}

// emit hands instances on in groups, without copying their data.
func (s *shuffleLogic) emit(insts []instance) []*messages.Batch {
	var out []*messages.Batch
	for len(insts) > 0 {
		n := min(len(insts), s.group)
		out = append(out, regroup(s.pass, insts[:n]))
		insts = insts[n:]
	}
	return out
}

func (s *shuffleLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	if len(s.buf) == 0 {
		return nil, 0, false, nil
	}
	return s.drain(), 0, false, nil
}

// ---- batch ----

// batchLogic is create_batch_reader: size instances per batch; the last,
// shorter batch is kept unless dropLast.
type batchLogic struct {
	size     int
	dropLast bool
	pass     uint32
	pending  []instance
	pipe     *shared // where stepped batches' storage comes back, if it does
}

// join makes a batch, in recycled storage when there is some.
func (l *batchLogic) join(insts []instance) (*messages.Batch, error) {
	g := regroup(l.pass, insts)
	slots, err := g.ToSlotsInto(l.pipe.reusable())
	if err != nil {
		return nil, fmt.Errorf("actors: batch: %w", err)
	}
	b, err := messages.FromSlots(slots, g.Ids)
	if err != nil {
		return nil, fmt.Errorf("actors: batch: %w", err)
	}
	b.Pass = l.pass
	return b, nil
}

func (l *batchLogic) start(pass uint32)               { l.pass, l.pending = pass, nil }
func (l *batchLogic) upstreamPass(pass uint32) uint32 { return pass }

func (l *batchLogic) take(b *messages.Batch) ([]*messages.Batch, error) {
	insts, err := split(b)
	if err != nil {
		return nil, err
	}
	var out []*messages.Batch
	pending := append(l.pending[:len(l.pending):len(l.pending)], insts...)
	for len(pending) >= l.size {
		o, err := l.join(pending[:l.size])
		if err != nil {
			return nil, err
		}
		out = append(out, o)
		pending = pending[l.size:]
	}
	l.pending = pending
	return out, nil
}

func (l *batchLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	pending := l.pending
	l.pending = nil
	if len(pending) == 0 || l.dropLast {
		return nil, 0, false, nil
	}
	o, err := l.join(pending)
	if err != nil {
		return nil, 0, false, err
	}
	return []*messages.Batch{o}, 0, false, nil
}

// ---- map ----

// MapFunc transforms the slots of one item (a group of instances before the
// batch stage, a batch after it). It must keep the number of instances: the
// ids stay with them. It may run again on the same item after a restart.
type MapFunc func(tensor.Slots) (tensor.Slots, error)

type mapLogic struct {
	fn   MapFunc
	pass uint32
}

func (l *mapLogic) start(pass uint32)               { l.pass = pass }
func (l *mapLogic) upstreamPass(pass uint32) uint32 { return pass }

func (l *mapLogic) take(b *messages.Batch) ([]*messages.Batch, error) {
	o, err := apply(l.fn, l.pass, b)
	if err != nil {
		return nil, err
	}
	return []*messages.Batch{o}, nil
}

// apply runs fn on one item, giving the result the item's ids and pass.
func apply(fn MapFunc, pass uint32, b *messages.Batch) (*messages.Batch, error) {
	slots, err := b.ToSlots()
	if err != nil {
		return nil, err
	}
	slots, err = fn(slots)
	if err != nil {
		return nil, fmt.Errorf("actors: map: %w", err)
	}
	o, err := messages.FromSlots(slots, b.Ids)
	if err != nil {
		return nil, fmt.Errorf("actors: map must keep the number of instances: %w", err)
	}
	o.Pass = pass
	return o, nil
}

func (l *mapLogic) finish() ([]*messages.Batch, uint32, bool, error) { return nil, 0, false, nil }

// ---- multi-pass ----

// multiPassLogic is create_multi_pass_reader: downstream pass q is upstream
// passes q*passes .. q*passes+passes-1 read one after the other, so every
// upstream pass (and its shuffle seed) is distinct across re-inits.
type multiPassLogic struct {
	passes   int
	pass     uint32
	upstream uint32
}

func (l *multiPassLogic) start(pass uint32) {
	l.pass, l.upstream = pass, pass*uint32(l.passes)
}

func (l *multiPassLogic) upstreamPass(pass uint32) uint32 { return pass * uint32(l.passes) }

func (l *multiPassLogic) take(b *messages.Batch) ([]*messages.Batch, error) {
	return []*messages.Batch{{Pass: l.pass, Slots: b.Slots, Parts: b.Parts, Ids: b.Ids}}, nil
}

func (l *multiPassLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	if int(l.upstream-l.pass*uint32(l.passes))+1 < l.passes {
		l.upstream++
		return nil, l.upstream, true, nil
	}
	return nil, 0, false, nil
}
