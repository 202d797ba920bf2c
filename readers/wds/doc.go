// Package wds reads WebDataset shards: tar archives whose members are
// grouped into samples by their key, the path up to the first dot of the
// file's name, each extension a field ("000017.jpg" and "000017.cls" are
// the fields jpg and cls of sample 000017). Members of a sample are
// consecutive, as the webdataset library and GNU tar write them.
//
// A Reader yields a sample as tensor.Slots, one slot a field, in the order
// of the fields' names; the shard's first sample fixes the fields, and a
// sample with others is damaged data. A field becomes a tensor by its
// extension: cls, cls2, index, inx and id hold a decimal integer, an int64
// [1]; npy a NumPy array, a tensor [1, shape...] of its dtype; anything else
// (jpg, png, txt, json, ...) its bytes, a uint8 sequence (a [n] tensor with
// LoD [[0, n]]). Members that are not regular files, and files without a
// dot in their name, are not fields.
//
// ScanSpans (scan.go) reads a shard's headers once and locates every sample
// and field: the ustar, GNU and pax headers that Python's tarfile, GNU tar
// and Go write are parsed there, at a small part of archive/tar's cost;
// anything else goes to Reader.Spans, through archive/tar, which gives the
// same spans (FuzzScanSpans) or says what is wrong. A SpanReader then
// reads samples by those byte ranges (NextOnto straight onto a
// tensor.Stack) without parsing a header again: for small members,
// headers are most of a shard's cost. Spans encode for a cache
// (MarshalBinary, UnmarshalSpans, checked in full).
//
// A header that Python's tarfile, which the webdataset library reads
// with, would read otherwise than archive/tar (tarfile.go: a name's prefix
// field, a number after a leading NUL) is refused as damage to the
// framing: a sample is never other bytes than webdataset's.
//
// Sizes are checked before anything is allocated: a member may hold at
// most MaxMemberBytes, and an npy header's shape must fit its member.
// Errors are *format.Error values naming the shard, the sample, the member
// and the offset of its header; damaged data matches format.ErrCorrupt.
// Readers are not safe for concurrent use.
//
// wds imports tensor and readers/format only.
package wds
