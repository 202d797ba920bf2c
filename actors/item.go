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
	// Seq is the item's position in its pass, from 0. With N devices, item
	// Seq is stepped by device Seq mod N.
	Seq       int
	Instances int
}

// toItem converts a message delivered to this consumer: its lane of the
// double buffer carries items lane, lane+lanes, lane+2*lanes, ...
func (c *consumerCell) toItem(b *messages.Batch) (Item, error) {
	slots, err := b.ToSlots()
	if err != nil {
		return Item{}, err
	}
	seq := int(b.Seq)*int(c.lanes) + int(c.lane)
	return Item{Slots: slots, IDs: b.Ids, Pass: int(b.Pass), Seq: seq, Instances: len(b.Ids)}, nil
}
