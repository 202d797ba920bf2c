package recordio

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/actorfeed/actorfeed/readers/format"
)

// A file cut at a chunk boundary is, chunk by chunk, a well-formed RecordIO
// file: nothing in Paddle's layout says how many chunks there should be. So
// the files actorfeed writes are framed by two marker chunks, which prove
// that a file is whole without changing what Paddle's reader sees (it skips
// a chunk of zero records whatever its payload):
//
//	first chunk  begin marker: "a trailer will follow"
//	...          the data chunks
//	last chunk   end marker (the trailer): how many data chunks and records
//	             came since the begin marker
//
// A marker chunk has 0 records, no compression and a markerSize-byte
// payload under a valid checksum:
//
//	offset  size  field
//	0       8     "AFMARKER"
//	8       4     kind: 1 begin, 2 end (little-endian uint32)
//	12      8     data chunks since the begin marker (0 in a begin marker)
//	20      8     records since the begin marker (0 in a begin marker)
//
// A file of begin, data, end, begin, data, end (two files concatenated) is
// whole too: each pair frames its own segment.

// markerMagic starts a marker chunk's payload.
const markerMagic = "AFMARKER"

// markerSize is the size of a marker chunk's payload.
const markerSize = 28

type markerKind uint32

const (
	beginMarker markerKind = 1
	endMarker   markerKind = 2
)

// marker is a decoded marker chunk.
type marker struct {
	kind            markerKind
	chunks, records uint64
}

func (m marker) payload() []byte {
	b := append(make([]byte, 0, markerSize), markerMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(m.kind))
	b = binary.LittleEndian.AppendUint64(b, m.chunks)
	return binary.LittleEndian.AppendUint64(b, m.records)
}

// chunk is the marker as a whole chunk, header included.
func (m marker) chunk() []byte {
	p := m.payload()
	h := Header{Checksum: crc32.ChecksumIEEE(p), Compressor: NoCompression, StoredSize: uint32(len(p))}
	return append(h.append(make([]byte, 0, HeaderSize+len(p))), p...)
}

// mayBeMarker tells from a header alone whether a chunk could be a marker,
// so that only such chunks have their payload read while indexing.
func mayBeMarker(h Header) bool {
	return h.NumRecords == 0 && h.Compressor == NoCompression && h.StoredSize == markerSize
}

// parseMarker decodes a verified payload; ok is false for anything that is
// not a marker.
func parseMarker(p []byte) (m marker, ok bool) {
	if len(p) != markerSize || !bytes.Equal(p[:8], []byte(markerMagic)) {
		return marker{}, false
	}
	m = marker{kind: markerKind(binary.LittleEndian.Uint32(p[8:])), chunks: binary.LittleEndian.Uint64(p[12:]), records: binary.LittleEndian.Uint64(p[20:])}
	if m.kind != beginMarker && m.kind != endMarker {
		return marker{}, false
	}
	return m, true
}

// Completeness says whether a file proves it is whole.
type Completeness int

const (
	// Unmarked files carry no markers (written by another writer, or with
	// WriterOptions.NoMarkers): whether one was cut at a chunk boundary
	// cannot be told.
	Unmarked Completeness = iota
	// Complete files end with a trailer that matches the chunks and
	// records before it.
	Complete
	// CutShort files announced a trailer and end without it: the end of the
	// file is missing.
	CutShort
)

func (c Completeness) String() string {
	switch c {
	case Complete:
		return "complete"
	case CutShort:
		return "cut short"
	}
	return "no trailer"
}

// segment follows the markers of a file as its chunks go by, for Scanner
// and LoadIndex alike.
type segment struct {
	begun           bool
	chunks, records uint64
	ended           bool // an end marker closed the last segment
}

// data counts a data chunk of n records.
func (s *segment) data(n int) {
	if s.begun {
		s.chunks++
		s.records += uint64(n)
	}
}

// mark takes a marker; it fails when an end marker does not match the
// segment it closes. An end marker met by a reader that started past the
// segment's begin marker is not checked: it never saw the segment's first
// chunks.
func (s *segment) mark(m marker) error {
	switch m.kind {
	case beginMarker:
		*s = segment{begun: true}
	case endMarker:
		begun, chunks, records := s.begun, s.chunks, s.records
		*s = segment{ended: true}
		if begun && (chunks != m.chunks || records != m.records) {
			return format.Corrupt("the trailer counts %d chunks and %d records, the file has %d and %d", m.chunks, m.records, chunks, records)
		}
	}
	return nil
}

// completeness is the verdict at the end of the file.
func (s *segment) completeness() Completeness {
	switch {
	case s.begun:
		return CutShort
	case s.ended:
		return Complete
	}
	return Unmarked
}
