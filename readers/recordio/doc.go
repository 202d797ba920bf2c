// Package recordio reads and writes RecordIO files in the layout of
// PaddlePaddle's Go recordio library, so files written by either can be read
// by the other.
//
// A file is a sequence of chunks. Each chunk is a 20-byte header followed by
// its stored (possibly compressed) payload. All integers are little-endian
// uint32:
//
//	offset  size  field
//	0       4     magic 0x01020304
//	4       4     checksum: IEEE CRC-32 of the stored payload
//	8       4     compressor: 0 none, 1 snappy (framed stream), 2 gzip
//	12      4     stored payload size in bytes
//	16      4     number of records
//	20      ...   payload
//
// Decompressed, a payload is the chunk's records back to back, each a uint32
// length followed by that many bytes. A chunk is the unit of random access
// (Index, ReadChunk), of sharding and of resuming.
//
// Files written here begin with a marker chunk and end with a trailer
// chunk (marker.go; both of 0 records, which Paddle's reader skips) so that
// a file cut at a chunk boundary is told from a whole one: see
// Index.Completeness.
//
// Where the original is weak this package is strict: a header cut short is
// io.ErrUnexpectedEOF rather than a clean end of file; declared sizes are
// checked against the file size before anything is allocated; a payload must
// hold exactly the declared records with no trailing bytes. Every failure is
// a *format.Error naming the file, chunk and offset, and damaged data matches
// format.ErrCorrupt.
//
// Writer and Scanner are not safe for concurrent use; an Index is read-only
// after LoadIndex and may be shared.
//
// recordio imports only readers/format and compression libraries; it knows
// nothing about tensors.
package recordio
