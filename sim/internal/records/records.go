// Package records writes the data sets the simulator's scenarios read:
// RecordIO files, WebDataset shards or TFRecord files whose records say
// which file and record they are, so a consumer can check that data and
// ids travel together. It is sim's scenario harnesses' (sim/scenario,
// sim/netsim, sim/objsim), and no one else's.
package records

import (
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// Value is what record r of file f holds in its first slot.
func Value(f, r int) int64 { return int64(f*1_000_000 + r) }

// Write writes file f of records records to path, in chunks of at most
// chunk bytes, each record r as Sample(f, r, ragged).
func Write(path string, f, records, chunk int, ragged bool) error {
	_, err := readers.WriteRecordFile(path, recordio.WriterOptions{MaxChunkBytes: chunk}, readers.Samples(records, func(r int) (tensor.Slots, error) {
		return Sample(f, r, ragged)
	}))
	return err
}

// Sample is record r of file f: Value in the first slot, and in the
// second a label, or, ragged, a sequence of 1 to 3 steps. A scenario's
// feed-queue producer pushes these, as file 0.
func Sample(f, r int, ragged bool) (tensor.Slots, error) {
	second := tensor.LoDTensor{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int32{int32(r % 10)})}
	if ragged {
		steps := 1 + r%3
		var err error
		if second, err = tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{steps, 1}, make([]int32, steps)), tensor.LoD{{0, steps}}); err != nil {
			return nil, err
		}
	}
	return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{Value(f, r)})}, second}, nil
}
