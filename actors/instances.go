package actors

import (
	"slices"

	"github.com/actorfeed/actorfeed/messages"
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
