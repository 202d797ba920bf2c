// Package idx reads IDX files, the format of MNIST and Fashion-MNIST, raw or
// gzip-compressed (detected from the content, not the name).
//
// An IDX file is a header and then row-major data, all big-endian:
//
//	offset  size   field
//	0       2      zero
//	2       1      element type: 0x08 uint8, 0x09 int8, 0x0B int16,
//	               0x0C int32, 0x0D float32, 0x0E float64
//	3       1      number of dimensions d (1..tensor.MaxRank)
//	4       4*d    dimensions, uint32 each; dimension 0 counts the samples
//	4+4*d   ...    data
//
// Reader yields the samples one at a time as tensors of shape
// [1, dims[1:]...] with little-endian storage; Pair reads an images file and
// its labels file as one stream of (image, label) samples.
//
// Declared sizes are checked before anything is allocated: against the file
// size for raw files, and against the largest expansion deflate allows for
// gzip files. Errors are *format.Error values naming the file and offset;
// damaged data matches format.ErrCorrupt, a file cut short also
// io.ErrUnexpectedEOF. Readers are not safe for concurrent use.
//
// idx imports tensor and readers/format only.
package idx
