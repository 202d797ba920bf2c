package readers

import (
	"context"
	"fmt"
	"time"

	"github.com/actorfeed/actorfeed/tensor"
)

// SlotSpec declares one output slot of a reader or a feed queue.
type SlotSpec struct {
	Name      string       // for messages; may be empty
	Shape     tensor.Shape // declared shape, -1 a wildcard; nil accepts any shape
	DType     tensor.DType // tensor.Invalid accepts any type
	LoDLevels int          // number of LoD levels the slot carries
}

func (s SlotSpec) label(i int) string {
	if s.Name == "" {
		return fmt.Sprintf("slot %d", i)
	}
	return fmt.Sprintf("slot %d (%s)", i, s.Name)
}

// CheckSlots verifies an item against declared slots: the slot count, and
// for each slot its dtype, its shape (same rank; every non-negative declared
// dim equal) and its number of LoD levels. The error names the slot and
// wraps tensor.ErrShape, tensor.ErrDType or tensor.ErrLoD.
func CheckSlots(specs []SlotSpec, item tensor.Slots) error {
	if len(item) != len(specs) {
		return fmt.Errorf("%w: %d slots, %d declared", tensor.ErrShape, len(item), len(specs))
	}
	for i, spec := range specs {
		t := item[i]
		if spec.DType.Valid() && t.DType() != spec.DType {
			return fmt.Errorf("%w: %s is %v, declared %v", tensor.ErrDType, spec.label(i), t.DType(), spec.DType)
		}
		if spec.Shape != nil && !spec.Shape.Matches(t.Shape()) {
			return fmt.Errorf("%w: %s has shape %v, declared %v", tensor.ErrShape, spec.label(i), t.Shape(), spec.Shape)
		}
		if len(t.LoD) != spec.LoDLevels {
			return fmt.Errorf("%w: %s has %d LoD levels, declared %d", tensor.ErrLoD, spec.label(i), len(t.LoD), spec.LoDLevels)
		}
	}
	return nil
}

type checked struct {
	Reader
	specs []SlotSpec
}

// Checked returns a reader that verifies every item of r with CheckSlots
// (PaddlePaddle Fluid's FileReader::ReadNext). A mismatch is returned as an error; the
// reader can go on after it.
func Checked(r Reader, specs []SlotSpec) Reader {
	return &checked{Reader: r, specs: specs}
}

// Version is the version of the object read (its ETag), "" for a file:
// the pipeline pins a job to the versions it indexed, checked or not.
func (c *checked) Version() string {
	if v, ok := c.Reader.(interface{ Version() string }); ok {
		return v.Version()
	}
	return ""
}

// Modified is when the object read was written, zero for a file.
func (c *checked) Modified() time.Time {
	if m, ok := c.Reader.(interface{ Modified() time.Time }); ok {
		return m.Modified()
	}
	return time.Time{}
}

func (c *checked) Next(ctx context.Context) (tensor.Slots, error) {
	item, err := c.Reader.Next(ctx)
	if err != nil {
		return nil, err
	}
	if err := CheckSlots(c.specs, item); err != nil {
		return nil, err
	}
	return item, nil
}
