package actors

import (
	"errors"
	"fmt"
	"slices"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// batchLogic is create_batch_reader: size instances per batch; the last,
// shorter batch is kept unless dropLast.
type batchLogic struct {
	size     int
	dropLast bool
	pass     uint32
	pending  protocol.Instances
	pipe     *shared // where stepped batches' storage comes back, if it does
	reuses   bool    // the consumers step this stage's batches: make them in that storage
	// blocks, when set, is told of every row joined (the readers' groups
	// are recycled once joined; see blockPool).
	blocks *blockPool
	counts partCounts
	// aligned: each input is an item of the order that covers size
	// positions (fewer at the end of the shard, or with holes) and becomes
	// one batch, keeping its place; the last is dropped with dropLast when
	// it covers fewer positions.
	aligned bool
}

// join copies instances [0, n) into a batch, in recycled storage when
// there is some. The batch never shares storage with its parts, so the
// devices may hand it back for reuse.
func (l *batchLogic) join(n int) (*messages.Batch, error) {
	var recycled tensor.Slots
	if l.reuses {
		recycled = l.pipe.reusable()
	}
	var alloc tensor.Alloc
	if st := l.pipe.storage; st != nil {
		alloc = st.alloc
	}
	slots, err := messages.JoinRefsAlloc(l.pending.Refs[:n], recycled, alloc)
	if st := l.pipe.storage; st != nil {
		st.unused(recycled, slots)
		if ferr := st.failed(); err == nil && ferr != nil {
			st.free(slots)
			return nil, ferr
		}
	}
	if err != nil {
		var ie *tensor.InstanceError
		if errors.As(err, &ie) && ie.Instance < n {
			// Without declared slots (Files.Slots) the first record that
			// differs is found here: say which it is.
			return nil, fmt.Errorf("actors: batch: %s does not batch with %s, the first of its batch: %w",
				l.pipe.sampleName(l.pending.Ids[ie.Instance]), l.pipe.sampleName(l.pending.Ids[0]), err)
		}
		return nil, fmt.Errorf("actors: batch: %w", err)
	}
	b, err := messages.FromSlots(slots, slices.Clone(l.pending.Ids[:n]))
	if err != nil {
		return nil, fmt.Errorf("actors: batch: %w", err)
	}
	b.Pass = l.pass
	// Nothing below fails: the rows are joined for good.
	if l.blocks != nil {
		l.blocks.joined(l.pending.Refs[:n], &l.counts)
	}
	l.pending.Cut(n)
	return b, nil
}

func (l *batchLogic) Start(pass uint32) {
	l.pass = pass
	l.pending.Reset()
}

func (l *batchLogic) UpstreamPass(pass uint32) uint32 { return pass }

func (l *batchLogic) Take(b *messages.Batch) ([]*messages.Batch, error) {
	if l.aligned {
		return l.takeAligned(b)
	}
	if err := l.pending.Add(b); err != nil {
		return nil, err
	}
	var out []*messages.Batch
	for l.pending.Len() >= l.size {
		o, err := l.join(l.size)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// takeAligned makes the batches of an item of the order: one, or one per
// cut (messages.Batch.Cuts), each keeping its place.
func (l *batchLogic) takeAligned(b *messages.Batch) ([]*messages.Batch, error) {
	if len(b.Cuts) == 0 && l.dropLast && b.Positions < uint64(l.size) {
		return nil, nil
	}
	if err := l.pending.Add(b); err != nil {
		return nil, err
	}
	cuts := b.Cuts
	if len(cuts) == 0 {
		cuts = []uint32{uint32(l.pending.Len())}
	}
	if err := checkCuts(cuts, l.pending.Len(), b.Positions); err != nil {
		l.pending.Reset()
		return nil, err
	}
	out := make([]*messages.Batch, 0, len(cuts))
	per := b.Positions / uint64(len(cuts))
	for i, n := range cuts {
		o, err := l.join(int(n))
		if err != nil {
			l.pending.Reset()
			return nil, err
		}
		protocol.KeepPlace(o, b)
		if o.Cuts = nil; len(b.Cuts) > 0 {
			o.Position, o.Positions = b.Position+uint64(i)*per, per
		}
		out = append(out, o)
	}
	return out, nil
}

// checkCuts checks an item's cuts against its instances and positions.
func checkCuts(cuts []uint32, instances int, positions uint64) error {
	sum := 0
	for _, n := range cuts {
		sum += int(n)
	}
	if sum != instances || positions%uint64(len(cuts)) != 0 {
		return fmt.Errorf("%w: an item of %d instances and %d positions is cut %v", ErrProtocol, instances, positions, cuts)
	}
	return nil
}

func (l *batchLogic) Finish() ([]*messages.Batch, uint32, bool, error) {
	n := l.pending.Len()
	if n == 0 || l.dropLast {
		l.pending.Reset()
		return nil, 0, false, nil
	}
	o, err := l.join(n)
	if err != nil {
		return nil, 0, false, err
	}
	return []*messages.Batch{o}, 0, false, nil
}
