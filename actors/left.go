package actors

import (
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
)

// Left is the records of an epoch that the job leaves out by design: the
// remainder that equal shares leave out under order.Drop, and the
// positions of a rank's last, short batch with Batch.DropLast. As sample
// ids, like Item.IDs.
type Left struct {
	Epoch int
	IDs   []uint64
}

// Left is what the current pass leaves out by design, for each of its
// epochs (a multi-pass stage's pass has several): rank 0 tells the
// remainder of the epoch's layout (every rank has the same), every rank
// the last batch it drops. A check of exactly-once delivery counts them
// apart from losses (actorfeed verify-ids). It needs what State needs.
func (p *Pipeline) Left() ([]Left, error) {
	if err := p.placed(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	pass := p.pass
	p.mu.Unlock()
	o := p.order
	lo, hi := o.passesOf(pass)
	var out []Left
	for q := lo; q < hi; q++ {
		layout, _ := o.Layout(q)
		var rs []order.Range
		if o.Rank == 0 {
			rs = layout.Dropped(o.Remainder)
		}
		if share, u := layout.Share(o.Rank, o.Remainder), uint64(o.Unit); p.dropLast && share%u != 0 {
			for _, s := range layout.Cut(o.Rank, o.Remainder, share-share%u) {
				if !s.Pad {
					rs = append(rs, s.Range)
				}
			}
		}
		if len(rs) > 0 {
			out = append(out, Left{Epoch: o.Epoch(q), IDs: sampleIDs(o.Ord.Epoch(uint64(o.Epoch(q))), rs)})
		}
	}
	return out, nil
}

// sampleIDs are the ids of the records at G positions rs of epoch ep,
// each window permuted once.
func sampleIDs(ep *order.Epoch, rs []order.Range) []uint64 {
	var out []uint64
	for _, r := range rs {
		ep.Records(r, func(f int, rec uint64) { out = append(out, messages.SampleID(f, int(rec))) })
	}
	return out
}
