package recordio

import (
	"errors"

	"github.com/actorfeed/actorfeed/readers/format"
)

// Damage is a part of a file that cannot be read. LoadIndex lists it and
// goes on where the format lets it: past a chunk whose header is sound in
// its place but not in its counts, or nowhere, when the damage leaves the
// next chunk's place unknown (a bad magic number, an unknown compressor, a
// size beyond the file, a file cut short): RecordIO has no sync marker,
// and searching the rest of the file for a magic number that checks out
// would cost time quadratic in the file's size on hostile input.
type Damage struct {
	Chunk  int   // the chunk's number, markers counted, as in errors
	Offset int64 // where the damage starts
	Bytes  int64 // how many bytes it spans
	// Records is what the damaged chunk declared, -1 where that count
	// cannot be trusted (it exceeds what the chunk's bytes can hold) or
	// there is no header to declare it.
	Records int
	// Tail is set when the damage runs to the end of the file.
	Tail bool
	Err  error // a *format.Error naming the file, chunk and offset
}

// maxRecords is the most records a chunk's stored bytes can hold: each
// record takes a 4-byte length prefix of its decoded payload, and a
// payload decodes to at most what its compressor can make of its stored
// bytes. Deflate expands at most 1,032 times; snappy's framed stream (read
// by S2's decoder, which also takes S2's repeat codes) at most one
// 65,536-byte block per 9-byte frame. And no chunk decodes beyond
// DefaultMaxDecodedBytes: a reader given another limit still agrees with
// every index on which chunks hold records.
func maxRecords(h Header) int64 {
	stored := int64(h.StoredSize)
	decoded := stored
	switch h.Compressor {
	case Snappy:
		decoded = (stored + 8) / 9 * 65536
	case Gzip:
		decoded = stored*1032 + 1024
	}
	return min(decoded, DefaultMaxDecodedBytes) / 4
}

// trust checks the records a sound header declares against what its bytes
// can hold, before the count sizes anything. A chunk that fails is damaged
// in its place: the next chunk starts where its stored size says.
func (c *chunkReader) trust(info ChunkInfo) error {
	if most := maxRecords(info.Header); int64(info.NumRecords) > most {
		return c.fail(info.Index, info.Offset, format.Corrupt("header declares %d records; %d stored bytes (compressor %v) hold at most %d", info.NumRecords, info.StoredSize, info.Compressor, most))
	}
	return nil
}

// chunkDamage is chunk info's damage, which err reports: the next chunk
// starts at its end.
func (c *chunkReader) chunkDamage(info ChunkInfo, err error) Damage {
	d := Damage{Chunk: info.Index, Offset: info.Offset, Bytes: info.End() - info.Offset, Records: -1, Err: err}
	if c.trust(info) == nil {
		d.Records = int(info.NumRecords)
	}
	return d
}

// tailDamage is the damage from info's offset to the end of the file,
// which err reports; parsed says whether info.Header was read (its magic
// number was right), so that the records it declared count.
func (c *chunkReader) tailDamage(info ChunkInfo, parsed bool, err error) Damage {
	d := Damage{Chunk: info.Index, Offset: info.Offset, Bytes: c.size - info.Offset, Records: -1, Tail: true, Err: err}
	if parsed && int64(info.NumRecords) <= maxRecords(info.Header) {
		d.Records = int(info.NumRecords)
	}
	return d
}

// isCorrupt tells damage, which skip mode gets past, from a failure to
// read, which it does not.
func isCorrupt(err error) bool { return errors.Is(err, format.ErrCorrupt) }
