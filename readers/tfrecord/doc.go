// Package tfrecord reads and writes TFRecord files: records framed by
// their length, a masked CRC-32C of the length, the data and a masked
// CRC-32C of the data, both checked; and the tf.train.Example messages
// such files hold, read into slots by a Spec of named features (bytes,
// float and int64 lists).
//
// A Reader yields records and seeks to one by the offsets of their
// headers (Offsets); Examples yields each record as tensor.Slots, one slot
// a feature of the spec, in the spec's order, or by a spec inferred from
// the first record; NextOnto parses a record straight onto a
// tensor.Stack (Parser.ParseViews). Examples are walked on the wire with
// protowire, not unmarshalled: only the spec's features are looked at.
//
// Sizes are checked before anything is allocated: a record may hold at
// most MaxRecordBytes, every value's tensor is sized by bytes the record
// holds (at most 8 bytes of slots a byte of it, an int64 of a one-byte
// varint), and a record's slots may hold at most MaxSampleBytes. Errors
// are *format.Error values naming the file, the record and the offset of
// its header; damaged data matches format.ErrCorrupt. Readers are not
// safe for concurrent use.
//
// tfrecord imports tensor, readers/format and protowire only.
package tfrecord
