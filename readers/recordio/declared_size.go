package recordio

import (
	"encoding/binary"

	"github.com/klauspost/compress/s2"
)

// declaredSize is the size a compressed payload says it decodes to, read
// from its framing without decoding it: the sum of a snappy stream's block
// lengths, or a gzip stream's ISIZE trailer (its size modulo 2^32, of the
// last member only). It sizes the decode buffer before the first decoding,
// so a fresh reader's first chunk is decoded once, not measured and
// decoded again; the decoder still checks every byte, so a payload that
// lies costs no more than one whose framing says nothing. It is 0 when the
// framing cannot tell.
func declaredSize(comp Compressor, stored []byte) int64 {
	switch comp {
	case Snappy:
		return snappyDeclared(stored)
	case Gzip:
		if len(stored) < 18 { // a header and a trailer
			return 0
		}
		return int64(binary.LittleEndian.Uint32(stored[len(stored)-4:]))
	}
	return 0
}

// snappyDeclared sums the lengths of a framed snappy stream's data blocks
// (https://github.com/google/snappy/blob/main/framing_format.txt): a
// compressed block begins with its decoded length, an uncompressed one is
// its own length; each follows a 4-byte checksum.
func snappyDeclared(b []byte) int64 {
	const (
		compressed   = 0x00
		uncompressed = 0x01
		checksum     = 4
	)
	var total int64
	for len(b) > 0 {
		if len(b) < 4 {
			return 0
		}
		kind, n := b[0], int(b[1])|int(b[2])<<8|int(b[3])<<16
		if len(b)-4 < n {
			return 0
		}
		body := b[4 : 4+n]
		b = b[4+n:]
		if kind != compressed && kind != uncompressed {
			continue // the stream identifier, padding, skippable chunks
		}
		if len(body) < checksum {
			return 0
		}
		if kind == uncompressed {
			total += int64(len(body) - checksum)
			continue
		}
		d, err := s2.DecodedLen(body[checksum:])
		if err != nil {
			return 0
		}
		total += int64(d)
	}
	return total
}
