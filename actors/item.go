package actors

import (
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/tensor"
)

// Item is what a pipeline delivers: a batch (or a group of instances, for
// a chain without a batch stage) with the id of every instance.
type Item struct {
	Slots tensor.Slots
	// IDs holds one id per instance: messages.SplitID gives the file's index
	// in the pipeline's list and the record's index in the file.
	IDs  []uint64
	Pass int
	// Epoch is the epoch of the order the item belongs to: Pass, plus the
	// epoch a resumed pipeline started in (Options.Resume).
	Epoch int
	// Seq is the item's position in its pass, from 0. With N devices, item
	// Seq is stepped by device Seq mod N.
	Seq int
	// Index is the item's position among its epoch's items in the order:
	// Seq, plus the items before a resumed pass's first (Options.Resume).
	// Without the order it is Seq. Under Shard.GlobalBatch it is the
	// epoch's global step, numbered on across resizes.
	Index     int
	Instances int
	// Padding is how many of the last instances repeat samples dealt to a
	// rank already, to keep the ranks' shares equal (order.Pad): a trainer
	// masks them.
	Padding int
	// StepShare, under Shard.GlobalBatch, is the item's part of its global
	// step: its samples that are not padding over the step's (the global
	// batch, or the samples of a padded last step). A rank whose loss is
	// the mean over its item multiplies it by StepShare*World before the
	// ranks' gradients are averaged, so that every sample of the step
	// weighs the same when the ranks' slices differ by one
	// (docs/tokens.md). 0 without a global batch.
	StepShare float64
}

// toItem converts a message delivered to this consumer: its lane of the
// double buffer carries items lane, lane+lanes, lane+2*lanes, ...
func (c *consumerCell) toItem(b *messages.Batch) (Item, error) {
	slots, err := b.ToSlots()
	if err != nil {
		return Item{}, err
	}
	it := Item{Slots: slots, IDs: b.Ids, Pass: int(b.Pass), Epoch: c.pipe.itemEpoch(b, b.Pass), Seq: c.seqOf(b),
		Instances: len(b.Ids), Padding: int(b.Padding)}
	it.Index = it.Seq
	if o := c.pipe.order; o != nil && b.Positions > 0 {
		it.Index = int(b.Position / uint64(o.Unit))
		if o.GlobalBatch > 0 {
			layout, _ := o.Layout(uint32(it.Epoch - o.First))
			it.StepShare = float64(it.Instances-it.Padding) / float64(layout.StepReal(uint64(it.Index)))
			it.Index += int(layout.FirstStep) // the epoch's step, across resizes
		}
	}
	return it, nil
}

// seqOf is the position in its pass of an item delivered to this consumer.
func (c *consumerCell) seqOf(b *messages.Batch) int { return int(b.Seq)*int(c.lanes) + int(c.lane) }
