// Package tensor owns the data that flows through actorfeed: element types
// (DType), shapes with -1 wildcards (Shape), dense tensors with contiguous
// little-endian storage (Tensor), level-of-detail sequence information (LoD,
// LoDTensor), the list of tensors that makes up one instance or one batch
// (Slots), batching (Concat) and un-batching (Split, Slots.Slice), and the
// versioned binary encoding of a Slots value (Encode, Decode; the byte layout
// is specified in docs/formats.md), and decoding records of one layout
// straight into one block of storage (Stack), sequences of any length end
// to end under a level of offsets.
//
// Tensors are values that share their storage: copying a Tensor does not copy
// its bytes, and typed views (View) alias the same memory. Nothing in this
// package is safe for concurrent mutation; concurrent reads are safe.
//
// tensor is the bottom layer. It must not import any other actorfeed package.
package tensor
