package actors

import (
	"errors"
	"fmt"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/supervisor"
	"github.com/actorfeed/actorfeed/tensor"
)

// MapFunc transforms the slots of one item (a group of instances before the
// batch stage, a batch after it). It must keep the number of instances: the
// ids stay with them. It may run again on the same item after a restart.
type MapFunc func(tensor.Slots) (tensor.Slots, error)

// Samples says which samples an item holds: the epoch of the order it
// belongs to (its pass, without an order), their ids, and a sample's
// name ("record 17 of part-3.tar") for errors.
type Samples struct {
	Epoch int
	IDs   []uint64
	Name  func(id uint64) string
	// Storage, when not nil, gives storage of at least size bytes, 8-byte
	// aligned, that nothing reads any more (a stepped batch's, recycled),
	// or nil when there is none: a map whose result is a new tensor may
	// make it there, and must then write all of it.
	Storage func(size int) []byte
}

// SampleMapFunc is a MapFunc that also sees which samples it maps, so
// that its random choices can be drawn from (seed, epoch, sample): the
// same after a restart or a resume, another in another epoch. A map that
// cannot read some samples' data (an image that does not decode) returns
// its result for every sample with a *format.BadSamples error naming
// them: under Options.OnCorrupt SkipCorrupt the stage drops those rows
// and counts them with the skipped records (Stats.Skipped, Stats.Corrupt);
// otherwise the pipeline fails with the error.
type SampleMapFunc func(Samples, tensor.Slots) (tensor.Slots, error)

// sampleMap is a Map's or XMap's function as a SampleMapFunc.
func sampleMap(fn MapFunc, samples SampleMapFunc) SampleMapFunc {
	if samples != nil {
		return samples
	}
	return func(_ Samples, s tensor.Slots) (tensor.Slots, error) { return fn(s) }
}

type mapLogic struct {
	fn   SampleMapFunc
	pipe *shared
	pass uint32
	// recycles: the devices step this stage's items and hand their
	// storage back, for the next item's result (Samples.Storage).
	recycles bool
	dropped  uint64 // samples dropped since the relay last counted them
}

func (l *mapLogic) Start(pass uint32)               { l.pass = pass }
func (l *mapLogic) UpstreamPass(pass uint32) uint32 { return pass }

func (l *mapLogic) Take(b *messages.Batch) ([]*messages.Batch, error) {
	var storage func(int) []byte
	if l.recycles {
		storage = l.storage
	}
	o, dropped, err := apply(l.pipe, l.fn, l.pass, b, storage)
	if err != nil {
		return nil, err
	}
	l.dropped += uint64(dropped)
	return []*messages.Batch{o}, nil
}

// takeDropped is what the stage dropped since it was last asked: the relay
// counts it with the skipped records in the same step as the items it
// pushes, so a restart counts nothing twice.
func (l *mapLogic) TakeDropped() uint64 {
	n := l.dropped
	l.dropped = 0
	return n
}

// storage is the smallest slot of a recycled batch that holds size bytes,
// or nil.
func (l *mapLogic) storage(size int) []byte {
	var fit []byte
	for _, t := range l.pipe.reusable() {
		if b := t.Bytes(); len(b) >= size && (fit == nil || len(b) < len(fit)) {
			fit = b
		}
	}
	return fit
}

// apply runs fn on one item, giving the result the item's ids and pass.
// Under the skip policy, the samples fn could not read leave the item
// (dropSamples); dropped counts them.
func apply(pipe *shared, fn SampleMapFunc, pass uint32, b *messages.Batch, storage func(int) []byte) (o *messages.Batch, dropped int, err error) {
	in, err := b.ToSlots()
	if err != nil {
		return nil, 0, err
	}
	slots, err := fn(Samples{Epoch: pipe.itemEpoch(b, pass), IDs: b.Ids, Name: pipe.sampleName, Storage: storage}, in)
	ids := b.Ids
	bad, isBad := errors.AsType[*format.BadSamples](err)
	if isBad && slots != nil && pipe.opts.OnCorrupt == supervisor.SkipCorrupt {
		if slots, ids, err = dropSamples(in, slots, ids, bad); err == nil {
			pipe.noteBadSamples(bad, b.Ids)
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("actors: map: %w", err)
	}
	if o, err = messages.FromSlots(slots, ids); err != nil {
		return nil, 0, fmt.Errorf("actors: map must keep the number of instances: %w", err)
	}
	o.Pass = pass
	protocol.KeepPlace(o, b)
	if len(ids) < len(b.Ids) {
		o.Padding, o.Cuts = placeWithout(b, bad.Rows)
	}
	return o, len(b.Ids) - len(ids), nil
}

func (l *mapLogic) Finish() ([]*messages.Batch, uint32, bool, error) { return nil, 0, false, nil }
