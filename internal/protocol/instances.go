package protocol

import (
	"slices"

	"github.com/actorfeed/actorfeed/messages"
)

// Instances are samples cut from items without copying: references into
// the items' parts, and their ids.
type Instances struct {
	Refs []messages.Ref
	Ids  []uint64
}

// Add appends an item's instances.
func (in *Instances) Add(b *messages.Batch) error {
	refs, err := b.Refs(in.Refs)
	if err != nil {
		return err
	}
	in.Refs, in.Ids = refs, append(in.Ids, b.GetIds()...)
	return nil
}

func (in *Instances) Len() int { return len(in.Refs) }

// Cut removes the first n instances, shifting the rest down, so the
// buffers are reused.
func (in *Instances) Cut(n int) {
	m := copy(in.Refs, in.Refs[n:])
	clear(in.Refs[m:])
	in.Refs = in.Refs[:m]
	in.Ids = in.Ids[:copy(in.Ids, in.Ids[n:])]
}

func (in *Instances) Reset() {
	clear(in.Refs)
	in.Refs, in.Ids = in.Refs[:0], in.Ids[:0]
}

// gather makes one item of the given pass from instances [lo, hi), still in
// their parts' storage.
func (in *Instances) gather(pass uint32, lo, hi int) (*messages.Batch, error) {
	b, err := messages.Gather(in.Refs[lo:hi], slices.Clone(in.Ids[lo:hi]))
	if err != nil {
		return nil, err
	}
	b.Pass = pass
	return b, nil
}

// KeepPlace gives dst, made from src, src's place in the order.
func KeepPlace(dst, src *messages.Batch) {
	dst.Position, dst.Positions, dst.Padding, dst.Cuts, dst.OrderPass = src.Position, src.Positions, src.Padding, src.Cuts, src.OrderPass
}
