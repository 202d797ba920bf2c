package actors

import (
	"fmt"
	"math/rand/v2"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// instance is one sample and its id, cut from an item without copying.
type instance struct {
	slots tensor.Slots
	id    uint64
}

// split cuts an item into its instances (views of its storage).
func split(b *messages.Batch) ([]instance, error) {
	slots, err := b.ToSlots()
	if err != nil {
		return nil, err
	}
	out := make([]instance, len(b.Ids))
	for i, id := range b.Ids {
		s, err := slots.Slice(i, i+1)
		if err != nil {
			return nil, fmt.Errorf("actors: instance %d: %w", i, err)
		}
		out[i] = instance{slots: s, id: id}
	}
	return out, nil
}

// join concatenates instances into one item of the given pass.
func join(pass uint32, insts []instance) (*messages.Batch, error) {
	parts := make([]tensor.Slots, len(insts))
	ids := make([]uint64, len(insts))
	for i, in := range insts {
		parts[i], ids[i] = in.slots, in.id
	}
	slots, err := tensor.Concat(parts)
	if err != nil {
		return nil, err
	}
	b, err := messages.FromSlots(slots, ids)
	if err != nil {
		return nil, err
	}
	b.Pass = pass
	return b, nil
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
		return s.emit(insts)
	}
	var out []*messages.Batch
	for len(insts) > 0 {
		n := min(len(insts), s.window-len(s.buf))
		s.buf = append(s.buf, insts[:n]...)
		insts = insts[n:]
		if len(s.buf) == s.window {
			o, err := s.drain()
			if err != nil {
				return nil, err
			}
			out = append(out, o...)
		}
	}
	return out, nil
}

func (s *shuffleLogic) drain() ([]*messages.Batch, error) {
	s.rng.Shuffle(len(s.buf), func(i, j int) { s.buf[i], s.buf[j] = s.buf[j], s.buf[i] })
	out, err := s.emit(s.buf)
	s.buf = nil
	return out, err
}

func (s *shuffleLogic) emit(insts []instance) ([]*messages.Batch, error) {
	var out []*messages.Batch
	for len(insts) > 0 {
		n := min(len(insts), s.group)
		b, err := join(s.pass, insts[:n])
		if err != nil {
			return nil, fmt.Errorf("actors: shuffle: %w", err)
		}
		out = append(out, b)
		insts = insts[n:]
	}
	return out, nil
}

func (s *shuffleLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	if len(s.buf) == 0 {
		return nil, 0, false, nil
	}
	out, err := s.drain()
	return out, 0, false, err
}

// ---- batch ----

// batchLogic is create_batch_reader: size instances per batch; the last,
// shorter batch is kept unless dropLast.
type batchLogic struct {
	size     int
	dropLast bool
	pass     uint32
	pending  []instance
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
		o, err := join(l.pass, pending[:l.size])
		if err != nil {
			return nil, fmt.Errorf("actors: batch: %w", err)
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
	o, err := join(l.pass, pending)
	if err != nil {
		return nil, 0, false, fmt.Errorf("actors: batch: %w", err)
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
	slots, err := b.ToSlots()
	if err != nil {
		return nil, err
	}
	slots, err = l.fn(slots)
	if err != nil {
		return nil, fmt.Errorf("actors: map: %w", err)
	}
	o, err := messages.FromSlots(slots, b.Ids)
	if err != nil {
		return nil, fmt.Errorf("actors: map must keep the number of instances: %w", err)
	}
	o.Pass = l.pass
	return []*messages.Batch{o}, nil
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
	return []*messages.Batch{{Pass: l.pass, Slots: b.Slots, Ids: b.Ids}}, nil
}

func (l *multiPassLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	if int(l.upstream-l.pass*uint32(l.passes))+1 < l.passes {
		l.upstream++
		return nil, l.upstream, true, nil
	}
	return nil, 0, false, nil
}
