package protocol

import (
	"math/rand/v2"

	"github.com/actorfeed/actorfeed/messages"
)

// ShuffleLogic is create_shuffle_reader: it fills a window of instances,
// shuffles it with a PCG generator seeded (seed, pass) and hands it out in
// groups before filling the next. Windows never mix, and the order equals
// readers.Shuffle's for the same seed and pass.
type ShuffleLogic struct {
	Window, Group int
	Seed          uint64
	pass          uint32
	rng           *rand.Rand
	buf           Instances // the window, then what is left of the item that filled it
}

func (s *ShuffleLogic) Start(pass uint32) {
	s.pass = pass
	s.buf.Reset()
	s.rng = rand.New(rand.NewPCG(s.Seed, uint64(pass)))
}

func (s *ShuffleLogic) UpstreamPass(pass uint32) uint32 { return pass }

func (s *ShuffleLogic) Take(b *messages.Batch) ([]*messages.Batch, error) {
	if err := s.buf.Add(b); err != nil {
		return nil, err
	}
	if s.Window <= 1 { // no window: pass the instances on as they come
		return s.drain(s.buf.Len(), false)
	}
	var out []*messages.Batch
	for s.buf.Len() >= s.Window {
		o, err := s.drain(s.Window, true)
		if err != nil {
			return nil, err
		}
		out = append(out, o...)
	}
	return out, nil
}

// drain shuffles the first n instances (the window) and hands them on in
// groups, without copying their data.
func (s *ShuffleLogic) drain(n int, shuffle bool) ([]*messages.Batch, error) {
	refs, ids := s.buf.Refs[:n], s.buf.Ids[:n]
	if shuffle {
		s.rng.Shuffle(n, func(i, j int) {
			refs[i], refs[j] = refs[j], refs[i]
			ids[i], ids[j] = ids[j], ids[i]
		})
	}
	var out []*messages.Batch
	for lo := 0; lo < n; lo += s.Group {
		o, err := s.buf.gather(s.pass, lo, min(lo+s.Group, n))
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	s.buf.Cut(n)
	return out, nil
}

func (s *ShuffleLogic) Finish() ([]*messages.Batch, uint32, bool, error) {
	if s.buf.Len() == 0 {
		return nil, 0, false, nil
	}
	out, err := s.drain(s.buf.Len(), s.Window > 1)
	return out, 0, false, err
}
