package actors

import (
	"math/rand/v2"

	"github.com/actorfeed/actorfeed/messages"
)

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
