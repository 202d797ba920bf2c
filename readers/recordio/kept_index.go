package recordio

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/actorfeed/actorfeed/readers/format"
)

// An Index is built by reading every chunk header: over an object store a
// request a chunk, in sequence, so a job that opens an object spends a
// round trip a chunk before its first batch. A sound index can be kept
// (readers keeps an object's by its version in the decode cache) and read
// back by the next job. The encoding: the magic, the completeness (4
// bytes), the chunk count (8), then each chunk's number and offset (8
// each) and header fields (4 each: checksum, compressor, stored size,
// records), and a CRC-32C of all before it. First records and the record
// count are not stored: they are the running sum of the chunks' counts.

const keptIndexMagic = "RIOINDX1"

const keptChunkBytes = 32

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrDamagedIndex is MarshalBinary's error for an index with damage: what
// a file's damage is depends on how it is read, and is found anew.
var ErrDamagedIndex = errors.New("recordio: an index with damage is not kept")

// MarshalBinary encodes a sound index for UnmarshalIndex.
func (x *Index) MarshalBinary() ([]byte, error) {
	if len(x.Damage) > 0 || x.Damaged > 0 || x.Completeness == CutShort {
		return nil, ErrDamagedIndex
	}
	b := make([]byte, 0, len(keptIndexMagic)+12+keptChunkBytes*len(x.Chunks)+4)
	b = append(b, keptIndexMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(x.Completeness))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(x.Chunks)))
	for _, c := range x.Chunks {
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Index))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Offset))
		b = binary.LittleEndian.AppendUint32(b, c.Checksum)
		b = binary.LittleEndian.AppendUint32(b, uint32(c.Compressor))
		b = binary.LittleEndian.AppendUint32(b, c.StoredSize)
		b = binary.LittleEndian.AppendUint32(b, c.NumRecords)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// UnmarshalIndex decodes an index MarshalBinary encoded for a file of size
// bytes, checking it as LoadIndex checks headers: chunks in order, apart,
// inside the file, of known compressors, declaring no more records than
// their bytes hold. What it allocates is bounded by len(b).
func UnmarshalIndex(b []byte, size int64) (*Index, error) {
	bad := func(what string, args ...any) (*Index, error) {
		return nil, format.Corrupt("recordio: kept index: "+what, args...)
	}
	head := len(keptIndexMagic) + 12
	if len(b) < head+4 || string(b[:len(keptIndexMagic)]) != keptIndexMagic {
		return bad("no %s magic", keptIndexMagic)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return bad("checksum mismatch")
	}
	x := &Index{Completeness: Completeness(binary.LittleEndian.Uint32(body[len(keptIndexMagic):]))}
	if x.Completeness != Unmarked && x.Completeness != Complete {
		return bad("completeness %d", x.Completeness)
	}
	n, rest := binary.LittleEndian.Uint64(body[len(keptIndexMagic)+4:]), body[head:]
	if n != uint64(len(rest))/keptChunkBytes || len(rest)%keptChunkBytes != 0 {
		return bad("%d chunks in %d bytes", n, len(rest))
	}
	x.Chunks = make([]ChunkInfo, n)
	end := int64(0)
	for i := range x.Chunks {
		e := rest[i*keptChunkBytes:]
		c := ChunkInfo{Index: int(binary.LittleEndian.Uint64(e)), Offset: int64(binary.LittleEndian.Uint64(e[8:])),
			FirstRecord: x.NumRecords, Header: Header{Checksum: binary.LittleEndian.Uint32(e[16:]),
				Compressor: Compressor(binary.LittleEndian.Uint32(e[20:])), StoredSize: binary.LittleEndian.Uint32(e[24:]),
				NumRecords: binary.LittleEndian.Uint32(e[28:])}}
		switch {
		case c.Index < 0 || i > 0 && c.Index <= x.Chunks[i-1].Index:
			return bad("chunk %d is numbered %d", i, c.Index)
		case c.Offset < end || c.Offset > size-HeaderSize || int64(c.StoredSize) > size-HeaderSize-c.Offset:
			return bad("chunk %d at %d (%d bytes) is not in a file of %d bytes after %d", i, c.Offset, c.StoredSize, size, end)
		case c.Compressor > Gzip:
			return bad("chunk %d has compressor %d", i, uint32(c.Compressor))
		case int64(c.NumRecords) > maxRecords(c.Header):
			return bad("chunk %d declares %d records in %d bytes", i, c.NumRecords, c.StoredSize)
		}
		x.Chunks[i], end = c, c.End()
		x.NumRecords += int(c.NumRecords)
	}
	return x, nil
}
