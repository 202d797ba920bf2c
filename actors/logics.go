package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// instances are samples cut from items without copying: references into
// the items' parts, and their ids.
type instances struct {
	refs []messages.Ref
	ids  []uint64
}

// add appends an item's instances.
func (in *instances) add(b *messages.Batch) error {
	refs, err := b.Refs(in.refs)
	if err != nil {
		return err
	}
	in.refs, in.ids = refs, append(in.ids, b.GetIds()...)
	return nil
}

func (in *instances) len() int { return len(in.refs) }

// cut removes the first n instances, shifting the rest down, so the
// buffers are reused.
func (in *instances) cut(n int) {
	m := copy(in.refs, in.refs[n:])
	clear(in.refs[m:])
	in.refs = in.refs[:m]
	in.ids = in.ids[:copy(in.ids, in.ids[n:])]
}

func (in *instances) reset() {
	clear(in.refs)
	in.refs, in.ids = in.refs[:0], in.ids[:0]
}

// gather makes one item of the given pass from instances [lo, hi), still in
// their parts' storage.
func (in *instances) gather(pass uint32, lo, hi int) (*messages.Batch, error) {
	b, err := messages.Gather(in.refs[lo:hi], slices.Clone(in.ids[lo:hi]))
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
	buf           instances // the window, then what is left of the item that filled it
}

func (s *shuffleLogic) start(pass uint32) {
	s.pass = pass
	s.buf.reset()
	s.rng = rand.New(rand.NewPCG(s.seed, uint64(pass)))
}

func (s *shuffleLogic) upstreamPass(pass uint32) uint32 { return pass }

func (s *shuffleLogic) take(b *messages.Batch) ([]*messages.Batch, error) {
	if err := s.buf.add(b); err != nil {
		return nil, err
	}
	if s.window <= 1 { // no window: pass the instances on as they come
		return s.drain(s.buf.len(), false)
	}
	var out []*messages.Batch
	for s.buf.len() >= s.window {
		o, err := s.drain(s.window, true)
		if err != nil {
			return nil, err
		}
		out = append(out, o...)
	}
	return out, nil
}

// drain shuffles the first n instances (the window) and hands them on in
// groups, without copying their data.
func (s *shuffleLogic) drain(n int, shuffle bool) ([]*messages.Batch, error) {
	refs, ids := s.buf.refs[:n], s.buf.ids[:n]
	if shuffle {
		s.rng.Shuffle(n, func(i, j int) {
			refs[i], refs[j] = refs[j], refs[i]
			ids[i], ids[j] = ids[j], ids[i]
		})
	}
	var out []*messages.Batch
	for lo := 0; lo < n; lo += s.group {
		o, err := s.buf.gather(s.pass, lo, min(lo+s.group, n))
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	s.buf.cut(n)
	return out, nil
}

func (s *shuffleLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	if s.buf.len() == 0 {
		return nil, 0, false, nil
	}
	out, err := s.drain(s.buf.len(), s.window > 1)
	return out, 0, false, err
}

// ---- batch ----

// batchLogic is create_batch_reader: size instances per batch; the last,
// shorter batch is kept unless dropLast.
type batchLogic struct {
	size     int
	dropLast bool
	pass     uint32
	pending  instances
	pipe     *shared // where stepped batches' storage comes back, if it does
	// blocks, when set, is told of every row joined (the readers' groups
	// are recycled once joined; see blockPool).
	blocks *blockPool
	counts partCounts
}

// join copies instances [0, n) into a batch, in recycled storage when
// there is some. The batch never shares storage with its parts, so the
// devices may hand it back for reuse.
func (l *batchLogic) join(n int) (*messages.Batch, error) {
	slots, err := messages.JoinRefs(l.pending.refs[:n], l.pipe.reusable())
	if err != nil {
		var ie *tensor.InstanceError
		if errors.As(err, &ie) && ie.Instance < n {
			// Without declared slots (Files.Slots) the first record that
			// differs is found here: say which it is.
			return nil, fmt.Errorf("actors: batch: %s does not batch with %s, the first of its batch: %w",
				l.pipe.sampleName(l.pending.ids[ie.Instance]), l.pipe.sampleName(l.pending.ids[0]), err)
		}
		return nil, fmt.Errorf("actors: batch: %w", err)
	}
	b, err := messages.FromSlots(slots, slices.Clone(l.pending.ids[:n]))
	if err != nil {
		return nil, fmt.Errorf("actors: batch: %w", err)
	}
	b.Pass = l.pass
	// Nothing below fails: the rows are joined for good.
	if l.blocks != nil {
		l.blocks.joined(l.pending.refs[:n], &l.counts)
	}
	l.pending.cut(n)
	return b, nil
}

func (l *batchLogic) start(pass uint32) {
	l.pass = pass
	l.pending.reset()
}

func (l *batchLogic) upstreamPass(pass uint32) uint32 { return pass }

func (l *batchLogic) take(b *messages.Batch) ([]*messages.Batch, error) {
	if err := l.pending.add(b); err != nil {
		return nil, err
	}
	var out []*messages.Batch
	for l.pending.len() >= l.size {
		o, err := l.join(l.size)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func (l *batchLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	n := l.pending.len()
	if n == 0 || l.dropLast {
		l.pending.reset()
		return nil, 0, false, nil
	}
	o, err := l.join(n)
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
	return []*messages.Batch{{Pass: l.pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids}}, nil
}

func (l *multiPassLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	if int(l.upstream-l.pass*uint32(l.passes))+1 < l.passes {
		l.upstream++
		return nil, l.upstream, true, nil
	}
	return nil, 0, false, nil
}
