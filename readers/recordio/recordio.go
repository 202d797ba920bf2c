package recordio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Magic starts every chunk header.
const Magic uint32 = 0x01020304

// HeaderSize is the size of a chunk header in bytes.
const HeaderSize = 20

// DefaultMaxChunkBytes is the default bound on the record bytes a Writer
// puts in one chunk. Upstream defaults to 32 MiB; a smaller chunk is a finer
// unit for sharding, random access and resuming after a failure.
const DefaultMaxChunkBytes = 1 << 20

// DefaultMaxDecodedBytes is the default bound on a chunk's decompressed size
// when reading: it keeps hostile or damaged input from allocating without
// limit. It is well above what any writer with default options produces.
const DefaultMaxDecodedBytes = 256 << 20

// Compressor names how a chunk's payload is stored.
type Compressor uint32

// The compressors of the format. The numbers are part of the file layout.
const (
	NoCompression Compressor = 0
	Snappy        Compressor = 1
	Gzip          Compressor = 2
)

// ErrUnknownCompressor is returned by ParseCompressor and by Writer for a
// compressor the format does not define.
var ErrUnknownCompressor = errors.New("recordio: unknown compressor")

// ErrReleased is returned by a Scanner used after Release.
var ErrReleased = errors.New("recordio: scanner released")

func (c Compressor) String() string {
	switch c {
	case NoCompression:
		return "none"
	case Snappy:
		return "snappy"
	case Gzip:
		return "gzip"
	}
	return fmt.Sprintf("compressor(%d)", uint32(c))
}

// ParseCompressor reads "none", "snappy" or "gzip".
func ParseCompressor(s string) (Compressor, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none", "":
		return NoCompression, nil
	case "snappy":
		return Snappy, nil
	case "gzip":
		return Gzip, nil
	}
	return 0, fmt.Errorf("%w %q (want none, snappy or gzip)", ErrUnknownCompressor, s)
}

// Header is a chunk header.
type Header struct {
	Checksum   uint32
	Compressor Compressor
	StoredSize uint32 // payload size in the file, after compression
	NumRecords uint32
}

func (h Header) append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, Magic)
	b = binary.LittleEndian.AppendUint32(b, h.Checksum)
	b = binary.LittleEndian.AppendUint32(b, uint32(h.Compressor))
	b = binary.LittleEndian.AppendUint32(b, h.StoredSize)
	return binary.LittleEndian.AppendUint32(b, h.NumRecords)
}

// parseHeader reads a header; the caller provides exactly HeaderSize bytes.
// It checks the magic only: the other fields are checked where they are used.
func parseHeader(b []byte) (Header, bool) {
	if binary.LittleEndian.Uint32(b) != Magic {
		return Header{}, false
	}
	return Header{
		Checksum:   binary.LittleEndian.Uint32(b[4:]),
		Compressor: Compressor(binary.LittleEndian.Uint32(b[8:])),
		StoredSize: binary.LittleEndian.Uint32(b[12:]),
		NumRecords: binary.LittleEndian.Uint32(b[16:]),
	}, true
}
