package recordio

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"

	"github.com/actorfeed/actorfeed/readers/format"
)

// ChunkInfo locates a chunk in a file.
type ChunkInfo struct {
	Index       int   // chunk number, from 0
	Offset      int64 // byte offset of the chunk's header
	FirstRecord int   // file-wide index of the chunk's first record
	Header
}

// End is the offset just past the chunk.
func (c ChunkInfo) End() int64 { return c.Offset + HeaderSize + int64(c.StoredSize) }

// chunkReader reads and verifies chunks of one file, reusing its buffers.
type chunkReader struct {
	r          io.ReaderAt
	size       int64
	name       string
	maxDecoded int

	hdr    [HeaderSize]byte
	stored []byte // the loaded chunk's stored payload, in buf
	// buf is the buffer stored is read into, whole: a prefetch reads the
	// header before the payload, and stored starts past it.
	buf []byte
	// ahead, when not nil, is the chunk at aheadAt read whole, header and
	// payload, by one read (prefetch): header and load read it from there.
	ahead   []byte
	aheadAt int64
	decoded []byte // the last decoded payload; its capacity is kept for the next
	starts  []int  // offsets of the records in cur
	cur     []byte // the loaded chunk's decoded payload
	snappy  *snappy.Reader
	gzip    *gzip.Reader
}

func newChunkReader(r io.ReaderAt, size int64, name string, maxDecoded int) *chunkReader {
	if maxDecoded <= 0 {
		maxDecoded = DefaultMaxDecodedBytes
	}
	return &chunkReader{r: r, size: size, name: name, maxDecoded: maxDecoded}
}

// reuse takes the buffers a reader released last, if some are kept.
func (c *chunkReader) reuse() {
	buffers.Lock()
	defer buffers.Unlock()
	n := len(buffers.sets)
	if n == 0 {
		return
	}
	b := buffers.sets[n-1]
	buffers.sets[n-1], buffers.sets = nil, buffers.sets[:n-1]
	buffers.bytes -= b.size()
	c.buf, c.decoded, c.starts, c.snappy, c.gzip = b.stored, b.decoded, b.starts, b.snappy, b.gzip
}

// chunkBuffers are a chunk reader's buffers and decompressors, kept for the
// next reader once one is released. A pipeline in an order opens a file
// for runs of chunks, and a fresh chunk's megabyte of buffers each time
// was most of its allocation.
type chunkBuffers struct {
	stored, decoded []byte
	starts          []int
	snappy          *snappy.Reader
	gzip            *gzip.Reader
}

func (b *chunkBuffers) size() int { return cap(b.stored) + cap(b.decoded) + 8*cap(b.starts) }

// buffers is a free list, not a sync.Pool: a pool is emptied by every
// garbage collection, and a pipeline that allocates its batches collects
// often enough that most readers found it empty and allocated (and
// zeroed) a chunk's buffers afresh. It keeps at most pooledBytes, a few
// readers' worth, whatever the process released, and hands out the last
// released first.
var buffers struct {
	sync.Mutex
	sets  []*chunkBuffers
	bytes int
}

// pooledBytes bounds the buffers kept (the decompressors' own aside).
const pooledBytes = 4 * DefaultMaxChunkBytes

// release hands the buffers on to the next reader; c must not be used
// again.
func (c *chunkReader) release() {
	b := &chunkBuffers{stored: c.buf[:0], decoded: c.decoded[:0], starts: c.starts[:0], snappy: c.snappy, gzip: c.gzip}
	c.buf, c.stored, c.decoded, c.starts, c.cur, c.snappy, c.gzip, c.ahead = nil, nil, nil, nil, nil, nil, nil, nil
	if b.size() == 0 && b.snappy == nil && b.gzip == nil {
		return
	}
	buffers.Lock()
	defer buffers.Unlock()
	if buffers.bytes+b.size() <= pooledBytes {
		buffers.sets, buffers.bytes = append(buffers.sets, b), buffers.bytes+b.size()
	}
}

func (c *chunkReader) fail(k int, off int64, err error) error {
	return &format.Error{Format: "recordio", File: c.name, Chunk: k, Record: -1, Offset: off, Err: err}
}

// header reads the header of chunk k at off. At the end of the file it
// returns io.EOF; anything short of a whole header is truncation. parsed
// says whether h was read (its magic number was right), also when its
// size or compressor is then refused.
func (c *chunkReader) header(k int, off int64) (h Header, parsed bool, err error) {
	if off == c.size {
		return Header{}, false, io.EOF
	}
	if c.size-off < HeaderSize {
		return Header{}, false, c.fail(k, off, format.Truncated("chunk header has %d of %d bytes", c.size-off, HeaderSize))
	}
	if c.ahead != nil && c.aheadAt == off {
		copy(c.hdr[:], c.ahead)
	} else if _, err := c.r.ReadAt(c.hdr[:], off); err != nil {
		return Header{}, false, c.fail(k, off, readErr(err, "chunk header"))
	}
	h, ok := parseHeader(c.hdr[:])
	if !ok {
		return Header{}, false, c.fail(k, off, format.Corrupt("bad magic %#08x, want %#08x", binary.LittleEndian.Uint32(c.hdr[:]), Magic))
	}
	if rest := c.size - off - HeaderSize; int64(h.StoredSize) > rest {
		return h, true, c.fail(k, off, format.Truncated("chunk declares %d payload bytes, %d remain in the file", h.StoredSize, rest))
	}
	if h.Compressor > Gzip {
		return h, true, c.fail(k, off, format.Corrupt("unknown compressor %d", uint32(h.Compressor)))
	}
	return h, true, nil
}

// prefetch reads chunk info, whose header an index gave, header and
// payload in one read, which header and load then take their bytes from:
// one request a chunk where a read is a request (an object store). What
// the read gets is checked as the two reads' bytes would be; a read that
// fails, or a chunk too large, is left to them, which say what is wrong.
func (c *chunkReader) prefetch(info ChunkInfo) {
	c.ahead = nil
	n := HeaderSize + int64(info.StoredSize)
	if info.StoredSize == 0 || n > c.size-info.Offset || int64(info.StoredSize) > c.maxStored(info.Compressor) {
		return
	}
	if int64(cap(c.buf)) < n {
		c.buf = make([]byte, n)
	}
	buf := c.buf[:n]
	if _, err := c.r.ReadAt(buf, info.Offset); err != nil {
		return
	}
	c.ahead, c.aheadAt = buf, info.Offset
}

// readErr turns a failed ReadAt of a range that the size said was there into
// a truncation (the file shrank) or passes an I/O error through.
func readErr(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return format.Truncated("%s: file ended early", what)
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// load reads, verifies and decodes chunk info, leaving its records
// described by c.decoded and c.starts.
func (c *chunkReader) load(info ChunkInfo) error {
	if int64(info.StoredSize) > c.maxStored(info.Compressor) {
		return c.fail(info.Index, info.Offset, format.Corrupt("chunk of %d stored bytes exceeds the %d-byte limit", info.StoredSize, c.maxStored(info.Compressor)))
	}
	n := int(info.StoredSize)
	if c.ahead != nil && c.aheadAt == info.Offset && len(c.ahead) == HeaderSize+n {
		c.stored, c.ahead = c.ahead[HeaderSize:], nil
	} else {
		c.ahead = nil
		if cap(c.buf) < n {
			c.buf = make([]byte, n)
		}
		c.stored = c.buf[:n]
		if _, err := c.r.ReadAt(c.stored, info.Offset+HeaderSize); err != nil {
			return c.fail(info.Index, info.Offset, readErr(err, "chunk payload"))
		}
	}
	if sum := crc32.ChecksumIEEE(c.stored); sum != info.Checksum {
		return c.fail(info.Index, info.Offset, format.Corrupt("checksum %#08x does not match header %#08x", sum, info.Checksum))
	}
	payload, err := c.decompress(info.Compressor)
	if err != nil {
		return c.fail(info.Index, info.Offset, err)
	}
	if err := c.split(payload, int(info.NumRecords)); err != nil {
		return c.fail(info.Index, info.Offset, err)
	}
	c.cur = payload
	return nil
}

// marker reads chunk info as a marker chunk (marker.go); ok is false when
// it is none, including a damaged one, which load then reports. A failed
// read is returned as load would return it.
func (c *chunkReader) marker(info ChunkInfo) (m marker, ok bool, err error) {
	if !mayBeMarker(info.Header) {
		return marker{}, false, nil
	}
	var buf [markerSize]byte
	if _, err := c.r.ReadAt(buf[:], info.Offset+HeaderSize); err != nil {
		return marker{}, false, c.fail(info.Index, info.Offset, readErr(err, "chunk payload"))
	}
	if crc32.ChecksumIEEE(buf[:]) != info.Checksum {
		return marker{}, false, nil
	}
	m, ok = parseMarker(buf[:])
	return m, ok, nil
}

// cutShort is the error at the end of a file whose begin marker announced
// a trailer that never came.
func (c *chunkReader) cutShort(k int) error {
	return c.fail(k, c.size, format.Truncated("the file ends without the trailer its begin marker announced: cut short after %d chunks", k))
}

func (c *chunkReader) decompress(comp Compressor) ([]byte, error) {
	if comp == NoCompression {
		return c.stored, nil // its size was checked against the limit before it was read
	}
	zr, err := c.open(comp)
	if err != nil {
		return nil, err
	}
	// Decode into the buffer kept from earlier chunks, grown first to the
	// size the payload's framing declares when that is within the limit.
	// Only a chunk that still outgrows it is measured, by decoding it to
	// nowhere, and then decoded again into a buffer of exactly its size: a
	// stream that decompresses beyond the limit (a gzip bomb) is refused
	// having allocated nothing, and a large chunk never costs a doubling
	// buffer's slack. The decoded bytes a reader holds are so at most the
	// limit.
	if n := declaredSize(comp, c.stored); n > int64(cap(c.decoded)) && n <= int64(c.maxDecoded) {
		c.decoded = nil
		c.decoded = make([]byte, 0, min(int64(c.maxDecoded), n+n/4))
	}
	n, err := io.ReadFull(zr, c.decoded[:cap(c.decoded)])
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return c.decoded[:n], nil // the stream ended within the buffer
	case err != nil:
		return nil, format.Corrupt("%v payload: %v", comp, err)
	}
	rest, err := io.Copy(io.Discard, io.LimitReader(zr, int64(c.maxDecoded)-int64(n)+1))
	if err != nil {
		return nil, format.Corrupt("%v payload: %v", comp, err)
	}
	if rest == 0 {
		return c.decoded[:n], nil
	}
	total := int64(n) + rest
	if total > int64(c.maxDecoded) {
		return nil, format.Corrupt("%v payload decompresses beyond the %d-byte limit", comp, c.maxDecoded)
	}
	c.decoded = nil // let the collector have it before the larger one is made
	// A quarter more room (within the limit) spares the next, slightly
	// larger chunk a second decoding.
	c.decoded = make([]byte, total, min(int64(c.maxDecoded), total+total/4))
	if zr, err = c.open(comp); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(zr, c.decoded); err != nil {
		return nil, format.Corrupt("%v payload: %v", comp, err)
	}
	return c.decoded, nil
}

// open starts decompressing the stored payload, reusing the decompressor.
func (c *chunkReader) open(comp Compressor) (io.Reader, error) {
	switch comp {
	case Snappy:
		if c.snappy == nil {
			c.snappy = snappy.NewReader(bytes.NewReader(c.stored))
		} else {
			c.snappy.Reset(bytes.NewReader(c.stored))
		}
		return c.snappy, nil
	case Gzip:
		if c.gzip == nil {
			g, err := gzip.NewReader(bytes.NewReader(c.stored))
			if err != nil {
				return nil, format.Corrupt("gzip payload: %v", err)
			}
			c.gzip = g
		} else if err := c.gzip.Reset(bytes.NewReader(c.stored)); err != nil {
			return nil, format.Corrupt("gzip payload: %v", err)
		}
		return c.gzip, nil
	}
	return nil, format.Corrupt("unknown compressor %d", uint32(comp))
}

// maxStored bounds a chunk's stored size before it is read: the limit on
// its decoded size, plus the most any compressor expands incompressible
// data (snappy's worst case is n + n/6 + 32 bytes).
func (c *chunkReader) maxStored(comp Compressor) int64 {
	if comp == NoCompression {
		return int64(c.maxDecoded)
	}
	return int64(c.maxDecoded) + int64(c.maxDecoded)/6 + 1<<16
}

// split checks that payload holds exactly n length-prefixed records and
// records where each starts.
func (c *chunkReader) split(payload []byte, n int) error {
	if n > len(payload)/4 {
		return format.Corrupt("header declares %d records but the payload has %d bytes", n, len(payload))
	}
	c.starts = c.starts[:0]
	off := 0
	for i := range n {
		if len(payload)-off < 4 {
			return format.Corrupt("record %d: length prefix cut off at payload byte %d", i, off)
		}
		size := int(binary.LittleEndian.Uint32(payload[off:]))
		off += 4
		if size > len(payload)-off {
			return format.Corrupt("record %d: length %d exceeds the %d payload bytes left", i, size, len(payload)-off)
		}
		c.starts = append(c.starts, off)
		off += size
	}
	if off != len(payload) {
		return format.Corrupt("%d bytes after the last of %d records", len(payload)-off, n)
	}
	c.starts = append(c.starts, off+4) // sentinel: record i spans starts[i] .. starts[i+1]-4
	return nil
}

// record returns record i of the loaded chunk, aliasing the chunk buffer.
func (c *chunkReader) record(i int) []byte {
	return c.cur[c.starts[i] : c.starts[i+1]-4 : c.starts[i+1]-4]
}

// ScannerOptions configure a Scanner. The zero value scans a whole file.
type ScannerOptions struct {
	// Name identifies the file in errors, usually its path.
	Name string
	// Start is the chunk to begin at, from an Index; the zero value is the
	// beginning of the file.
	Start ChunkInfo
	// MaxDecodedBytes bounds one chunk's decompressed size. Default
	// DefaultMaxDecodedBytes. Whatever the limit, a chunk that declares
	// more records than DefaultMaxDecodedBytes/4 is damage, as in an
	// Index.
	MaxDecodedBytes int
}

// Position is where a Scanner stands: the chunk and file-wide record index of
// the record last returned.
type Position struct {
	Chunk       int
	ChunkOffset int64
	Record      int
}

// Scanner reads the records of a RecordIO file in order, verifying every
// chunk before returning any of its records.
type Scanner struct {
	c      *chunkReader
	next   ChunkInfo // the chunk after the loaded one
	loaded ChunkInfo
	i      int // index within the loaded chunk of the next record
	n      int // records in the loaded chunk
	rec    []byte
	err    error
	bad    ChunkInfo // where the damage err reports starts
	skip   skipKind  // how SkipChunk gets past it
	seg    segment   // the markers seen, to prove the file whole at its end
	// hint is the chunk Reset started at as an index gave it: its header
	// and payload are read in one read (chunkReader.prefetch).
	hint ChunkInfo
}

// skipKind is how far a Scanner's damage reaches.
type skipKind int

const (
	noSkip     skipKind = iota // the error is not damage (or there is none)
	skipChunk                  // a sound header, a payload that failed: its records are lost
	skipCounts                 // a header whose counts cannot be trusted: no record is known lost
	skipTail                   // the next chunk's place is unknown: the rest of the file is lost
)

// NewScanner returns a Scanner over the size bytes of r.
func NewScanner(r io.ReaderAt, size int64, opts ScannerOptions) *Scanner {
	start := opts.Start
	start.Header = Header{}
	c := newChunkReader(r, size, opts.Name, opts.MaxDecodedBytes)
	c.reuse()
	return &Scanner{c: c, next: start, loaded: ChunkInfo{Index: -1}}
}

// Release gives the scanner's buffers to the next scanner made; the
// scanner, and every record it returned, must not be used again.
func (s *Scanner) Release() {
	s.c.release()
	s.rec, s.err = nil, ErrReleased
}

// Reset moves the scanner to start (the zero ChunkInfo is the beginning of
// the file) and clears its error, keeping its buffers: a new pass over the
// same file allocates nothing.
func (s *Scanner) Reset(start ChunkInfo) {
	hint := start
	start.Header = Header{}
	*s = Scanner{c: s.c, next: start, loaded: ChunkInfo{Index: -1}, hint: hint}
}

// Scan advances to the next record. It returns false at the end of the file
// or on an error; Err tells which.
func (s *Scanner) Scan() bool {
	if s.err != nil {
		return false
	}
	for s.i >= s.n {
		if s.hint.StoredSize > 0 && s.hint.Offset == s.next.Offset && s.hint.Index == s.next.Index {
			s.c.prefetch(s.hint)
			s.hint = ChunkInfo{}
		}
		h, _, err := s.c.header(s.next.Index, s.next.Offset)
		if errors.Is(err, io.EOF) && s.seg.completeness() == CutShort {
			err = s.c.cutShort(s.next.Index)
		}
		if err != nil {
			return s.stop(s.next, skipTail, err)
		}
		info := s.next
		info.Header = h
		m, ok, err := s.c.marker(info)
		if err != nil {
			return s.stop(info, noSkip, err)
		}
		if ok {
			s.next = ChunkInfo{Index: info.Index + 1, Offset: info.End(), FirstRecord: info.FirstRecord}
			if err := s.seg.mark(m); err != nil {
				return s.stop(info, skipCounts, s.c.fail(info.Index, info.Offset, err))
			}
			continue
		}
		if err := s.c.trust(info); err != nil {
			return s.stop(info, skipCounts, err)
		}
		if err := s.c.load(info); err != nil {
			return s.stop(info, skipChunk, err)
		}
		s.loaded = info
		s.seg.data(int(h.NumRecords))
		s.i, s.n = 0, int(h.NumRecords)
		s.next = ChunkInfo{Index: info.Index + 1, Offset: info.End(), FirstRecord: info.FirstRecord + s.n}
	}
	s.rec = s.c.record(s.i)
	s.i++
	return true
}

// SkipChunk gets past the damage that stopped Scan, as LoadIndex lists it
// (Damage). A chunk whose payload failed verification (a checksum mismatch,
// a bad compressed stream) is skipped whole and its declared records are
// returned as lost. A chunk whose header declares more than its bytes can
// hold is skipped too, with no record lost: its records were never
// counted, here or in an Index. Damage that leaves the next chunk's place
// unknown (a bad magic number, a size beyond the file, a file cut short)
// ends the file: Scan then returns false with no error. ok is false when
// the error is no damage (a failed read) or there is none.
func (s *Scanner) SkipChunk() (records int, ok bool) {
	if s.err == nil || s.skip == noSkip {
		return 0, false
	}
	bad, seg := s.bad, s.seg
	next := ChunkInfo{Index: bad.Index + 1, Offset: bad.End(), FirstRecord: bad.FirstRecord}
	switch s.skip {
	case skipChunk:
		records = int(bad.NumRecords)
		seg.data(records) // the trailer counts it
		next.FirstRecord += records
	case skipCounts:
		if !mayBeMarker(bad.Header) {
			seg.data(int(bad.NumRecords))
		}
	case skipTail:
		s.err, s.skip = io.EOF, noSkip
		return 0, true
	}
	*s = Scanner{c: s.c, next: next, loaded: ChunkInfo{Index: -1}, seg: seg}
	return records, true
}

// stop ends a Scan with err, met at info, which skip says how to get past.
// Only damage is skipped; a failure to read is not.
func (s *Scanner) stop(info ChunkInfo, skip skipKind, err error) bool {
	if !isCorrupt(err) {
		skip = noSkip
	}
	s.err, s.bad, s.skip = err, info, skip
	return false
}

// Record is the record found by the last Scan. Like bufio.Scanner, the bytes
// may be overwritten by a later Scan: copy them to keep them.
func (s *Scanner) Record() []byte { return s.rec }

// Err is the error that stopped Scan, nil at a clean end of file.
func (s *Scanner) Err() error {
	if errors.Is(s.err, io.EOF) {
		return nil
	}
	return s.err
}

// Position is where the last record returned came from.
func (s *Scanner) Position() Position {
	return Position{Chunk: s.loaded.Index, ChunkOffset: s.loaded.Offset, Record: s.loaded.FirstRecord + s.i - 1}
}

// Next is where the scanner stands: the chunk it reads next once the loaded
// one is used up. A new Scanner started at Next and skipping Skip records
// resumes exactly after the last record returned.
func (s *Scanner) Next() (start ChunkInfo, skip int) {
	if s.i < s.n {
		return s.loaded, s.i
	}
	return s.next, 0
}

// Index lists the data chunks of a file (its markers left out).
type Index struct {
	Chunks     []ChunkInfo
	NumRecords int
	// Completeness is whether the file proves it is whole. A CutShort file
	// is listed as far as it goes; reading it to its end fails.
	Completeness Completeness
	// Damage is what could not be read, in file order; its chunks are not
	// in Chunks and their records not in NumRecords. Err reports the
	// first. It lists at most maxDamage entries; Damaged counts them all.
	Damage  []Damage
	Damaged int
}

// Err is the first damage found, nil for a sound file. A reader that
// fails on corrupt data fails with it; one that skips reads Chunks.
func (x *Index) Err() error {
	if len(x.Damage) == 0 {
		return nil
	}
	return x.Damage[0].Err
}

// maxDamage bounds the damage an Index lists: a file of millions of
// damaged chunks costs no more than a few thousand entries.
const maxDamage = 1024

// LoadIndex reads every chunk header of the file (not the payloads), checking
// magic numbers, that each declared size fits the file and that each
// declared record count fits the chunk's bytes. It reads len(Chunks)
// headers, and the small payload of each marker chunk, whose counts it
// checks; checksums of data chunks are verified only when a chunk is read.
// Damage does not stop it: it is listed (Index.Damage, Index.Err) and the
// index goes on past it where the next chunk's place is known. The error
// is a failure to read the file.
func LoadIndex(r io.ReaderAt, size int64, name string) (*Index, error) {
	c := newChunkReader(r, size, name, 0)
	idx := &Index{}
	next := ChunkInfo{}
	var seg segment
	for {
		h, parsed, err := c.header(next.Index, next.Offset)
		if errors.Is(err, io.EOF) {
			idx.Completeness = seg.completeness()
			if idx.Completeness == CutShort {
				idx.damage(c.tailDamage(next, false, c.cutShort(next.Index)))
			}
			return idx, nil
		}
		next.Header = h
		if err != nil {
			if !isCorrupt(err) {
				return nil, err
			}
			idx.damage(c.tailDamage(next, parsed, err))
			idx.Completeness = seg.completeness()
			return idx, nil
		}
		m, ok, err := c.marker(next)
		if err != nil {
			return nil, err
		}
		after := ChunkInfo{Index: next.Index + 1, Offset: next.End(), FirstRecord: idx.NumRecords}
		if ok {
			if err := seg.mark(m); err != nil {
				idx.damage(c.chunkDamage(next, c.fail(next.Index, next.Offset, err)))
			}
		} else if err := c.trust(next); err != nil {
			seg.data(int(h.NumRecords))
			idx.damage(c.chunkDamage(next, err))
		} else {
			seg.data(int(h.NumRecords))
			idx.Chunks = append(idx.Chunks, next)
			idx.NumRecords += int(h.NumRecords)
			after.FirstRecord = idx.NumRecords
		}
		next = after
	}
}

// damage lists d, up to maxDamage entries.
func (x *Index) damage(d Damage) {
	x.Damaged++
	if len(x.Damage) < maxDamage {
		x.Damage = append(x.Damage, d)
	}
}

// Locate returns the chunk holding the file-wide record index rec and the
// record's index within it; ok is false past the end.
func (x *Index) Locate(rec int) (chunk ChunkInfo, within int, ok bool) {
	if rec < 0 || rec >= x.NumRecords {
		return ChunkInfo{}, 0, false
	}
	k := sort.Search(len(x.Chunks), func(i int) bool {
		return x.Chunks[i].FirstRecord+int(x.Chunks[i].NumRecords) > rec
	})
	return x.Chunks[k], rec - x.Chunks[k].FirstRecord, true
}

// ChunkAt is the data chunk whose header is at offset, if the index lists
// one there.
func (x *Index) ChunkAt(offset int64) (ChunkInfo, bool) {
	k, found := sort.Find(len(x.Chunks), func(i int) int { return cmp.Compare(offset, x.Chunks[i].Offset) })
	if !found {
		return ChunkInfo{}, false
	}
	return x.Chunks[k], true
}

// ReadChunk reads and verifies one chunk (from an Index) alone and returns
// its records, which the caller owns.
func ReadChunk(r io.ReaderAt, size int64, name string, info ChunkInfo) ([][]byte, error) {
	c := newChunkReader(r, size, name, 0)
	h, _, err := c.header(info.Index, info.Offset)
	if errors.Is(err, io.EOF) {
		return nil, c.fail(info.Index, info.Offset, format.Truncated("no chunk at offset %d: end of file", info.Offset))
	}
	if err != nil {
		return nil, err
	}
	if h != info.Header {
		return nil, c.fail(info.Index, info.Offset, format.Corrupt("header changed since the index was read"))
	}
	if err := c.load(info); err != nil {
		return nil, err
	}
	out := make([][]byte, info.NumRecords)
	for i := range out {
		out[i] = c.record(i)
	}
	return out, nil
}
