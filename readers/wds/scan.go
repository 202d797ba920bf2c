package wds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/actorfeed/actorfeed/readers/format"
)

// ScanSpans locates the samples of the raw shard of size bytes in src.
// The headers shards are written with (ustar and GNU headers, pax records
// of path, size, ids and times, as Python's tarfile, GNU tar and Go write
// them) are read here at a small part of archive/tar's cost per header: a
// shard of small members is mostly headers. A shard with anything else in
// it, or anything wrong, is read again by archive/tar, which gives the
// same spans where the scan gives any (FuzzScanSpans) and says what is
// wrong.
func ScanSpans(src io.ReaderAt, size int64, name string) (*Spans, error) {
	s := scanner{src: src, size: size}
	sp, err := s.spans()
	if errors.Is(err, errIrregular) {
		return NewReader(io.NewSectionReader(src, 0, size), name).Spans()
	}
	if err != nil {
		return nil, &format.Error{Format: "wds", File: name, Chunk: -1, Record: len(sp.starts), Offset: s.off, Err: err}
	}
	return sp, nil
}

// errIrregular is anything the scan leaves to archive/tar.
var errIrregular = errors.New("wds: irregular header")

// scanner walks a shard's headers through a window of it.
type scanner struct {
	src     io.ReaderAt
	size    int64
	off     int64 // the next header
	win     []byte
	at      int64 // win holds the shard's bytes from at on
	members []member
	ptrs    []*member
}

// A scan reads a window of the shard where headers lie close together,
// and only the headers' neighbourhood past a large member's data.
const (
	scanWindow = 256 << 10
	scanNear   = 4 << 10
	scanFar    = 64 << 10
)

// spans groups the members into samples as Reader.sample does.
func (s *scanner) spans() (*Spans, error) {
	sp := &Spans{}
	var key string
	for {
		m, err := s.member()
		if errors.Is(err, io.EOF) {
			s.flush(sp)
			return sp, nil
		}
		if err != nil {
			return sp, err
		}
		if len(s.members) > 0 && m.key != key {
			s.flush(sp)
		}
		key = m.key
		s.members = append(s.members, m)
	}
}

// flush adds the members read as a sample.
func (s *scanner) flush(sp *Spans) {
	if len(s.members) == 0 {
		return
	}
	s.ptrs = s.ptrs[:0]
	for i := range s.members {
		s.ptrs = append(s.ptrs, &s.members[i])
	}
	sp.add(s.ptrs)
	s.members = s.members[:0]
}

// member reads the next member that is a field, as Reader.member does.
func (s *scanner) member() (member, error) {
	for {
		at := s.off
		h, err := s.header()
		if err != nil {
			return member{}, err
		}
		if h.typ != '0' {
			continue
		}
		if key, ext, ok := split(h.name); ok {
			return member{key: key, ext: ext, off: at, start: h.start, size: h.size}, nil
		}
	}
}

// scanned is a header as the scan reads it, pax records applied.
type scanned struct {
	name        string
	typ         byte
	start, size int64 // the data's
}

// header reads the next header, and the pax header before it, and moves
// past its data; io.EOF at the archive's end.
func (s *scanner) header() (scanned, error) {
	b, err := s.block()
	if err != nil {
		return scanned{}, err
	}
	h, ok := parseHeader(b)
	if !ok {
		return scanned{}, errIrregular
	}
	pax := paxRecords{size: -1}
	if h.typ == 'x' {
		if h.size > scanNear {
			return scanned{}, errIrregular // tar's reader has a say on long records
		}
		data, err := s.data(h.size)
		if err != nil {
			return scanned{}, err
		}
		if pax, ok = parsePAXRecords(data); !ok {
			return scanned{}, errIrregular
		}
		if b, err = s.block(); err != nil {
			return scanned{}, errors.Join(err, errIrregular) // a pax header at the end: tar's to judge
		}
		if h, ok = parseHeader(b); !ok || h.typ == 'x' {
			return scanned{}, errIrregular
		}
	}
	if pax.path != "" {
		h.name = pax.path
	}
	if pax.size >= 0 {
		h.size = pax.size
	}
	switch {
	case h.typ == '0':
		if h.size > MaxMemberBytes {
			return scanned{}, errIrregular // tar's reader says so
		}
	case h.typ >= '1' && h.typ <= '6': // no data, whatever the size says
		if h.size != 0 {
			return scanned{}, errIrregular
		}
	default:
		return scanned{}, errIrregular
	}
	h.start = s.off
	return h, s.skip(h.size)
}

// block reads the header block at s.off and moves past it; io.EOF where
// the archive ends: at the shard's end or at two zero blocks.
func (s *scanner) block() ([]byte, error) {
	if s.off == s.size {
		return nil, io.EOF
	}
	b, err := s.bytes(s.off, block)
	if err != nil {
		return nil, err
	}
	s.off += block
	if !isZero(b) {
		return b, nil
	}
	if s.off == s.size {
		return nil, io.EOF
	}
	if b, err = s.bytes(s.off, block); err != nil {
		return nil, err
	}
	if !isZero(b) {
		return nil, errIrregular
	}
	return nil, io.EOF
}

// data reads the n bytes of a pax header's records at s.off (at most
// scanNear: header refuses more) and moves past them and their padding.
func (s *scanner) data(n int64) ([]byte, error) {
	b, err := s.bytes(s.off, int(n))
	if err != nil {
		return nil, err
	}
	return b, s.skip(n)
}

// skip moves past n bytes of a member's data and their padding, which the
// shard must hold; nothing is read.
func (s *scanner) skip(n int64) error {
	padded := (n + block - 1) / block * block
	if padded > s.size-s.off {
		return errIrregular
	}
	s.off += padded
	return nil
}

// bytes is the n bytes at off, a view of the window: errIrregular where
// the shard does not hold them.
func (s *scanner) bytes(off int64, n int) ([]byte, error) {
	end := s.at + int64(len(s.win))
	if off >= s.at && off+int64(n) <= end {
		return s.win[off-s.at : off-s.at+int64(n)], nil
	}
	if int64(n) > s.size-off {
		return nil, errIrregular
	}
	want := int64(scanWindow)
	if off-end > scanFar {
		want = scanNear
	}
	want = min(max(want, int64(n)), s.size-off)
	if int64(cap(s.win)) < want {
		s.win = make([]byte, scanWindow)
	}
	got, err := s.src.ReadAt(s.win[:want], off)
	s.win, s.at = s.win[:got], off
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, errIrregular // the shard is shorter than it was
		}
		return nil, err
	}
	return s.win[:n], nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// parseHeader reads a ustar or GNU header block as archive/tar reads it;
// false for any other, and for any field tar would refuse or that the scan
// does not read (base-256 numbers, GNU times, star headers).
func parseHeader(b []byte) (scanned, bool) {
	want, ok := parseOctal(b[148:156])
	unsigned, signed := checksums(b)
	if !ok || want != unsigned && want != signed {
		return scanned{}, false
	}
	ustar := string(b[257:263]) == "ustar\x00"
	gnu := string(b[257:265]) == "ustar  \x00"
	if !ustar && !gnu || ustar && string(b[508:512]) == "tar\x00" {
		return scanned{}, false
	}
	if gnu && (b[345] != 0 || b[357] != 0) {
		return scanned{}, false
	}
	var h scanned
	for _, f := range [...][2]int{{100, 108}, {108, 116}, {116, 124}, {124, 136}, {136, 148}, {329, 337}, {337, 345}} {
		v, ok := parseOctal(b[f[0]:f[1]])
		if !ok {
			return scanned{}, false
		}
		if f[0] == 124 {
			h.size = v
		}
	}
	h.typ, h.name = b[156], cString(b[:100])
	if prefix := cString(b[345:500]); ustar && prefix != "" {
		h.name = prefix + "/" + h.name
	}
	return h, true
}

// checksums sums the block with its checksum field as spaces, its bytes
// unsigned and signed (tar takes either), eight bytes at a time: it is
// most of what reading a header costs.
func checksums(b []byte) (unsigned, signed int64) {
	const lo, top = 0x00ff00ff00ff00ff, 0x8080808080808080
	// lanes: four 16-bit sums (64 words add at most 32,640 to each); tops:
	// eight 8-bit counts of bytes >= 0x80.
	var lanes, tops uint64
	for i := 0; i < block; i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		lanes += x&lo + x>>8&lo
		tops += x & top >> 7
	}
	sum := int64(lanes&0xffff + lanes>>16&0xffff + lanes>>32&0xffff + lanes>>48)
	tops = tops&lo + tops>>8&lo
	high := int64(tops&0xffff + tops>>16&0xffff + tops>>32&0xffff + tops>>48)
	for _, c := range b[148:156] {
		sum += ' ' - int64(c)
		if c >= 0x80 {
			high--
		}
	}
	return sum, sum - 256*high
}

// parseOctal reads a numeric field as tar does: NULs and spaces trimmed,
// then up to the first NUL; false for a base-256 number, more digits than
// an int64 holds, and a number other than 0 after a leading NUL: Python's
// tarfile reads a field only up to its first NUL, so it reads 0 there.
func parseOctal(b []byte) (int64, bool) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		return 0, false
	}
	nul := false
	for len(b) > 0 && (b[0] == ' ' || b[0] == 0) {
		nul = nul || b[0] == 0
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == 0) {
		b = b[:len(b)-1]
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) > 21 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v<<3 | int64(c-'0')
	}
	return v, !nul || v == 0
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// paxRecords are the records of a pax header that the scan applies: path
// ("" when absent) and size (-1 when absent).
type paxRecords struct {
	path string
	size int64
}

// parsePAXRecords reads a pax header's records as archive/tar does; false
// for any it would refuse, sparse files and a record given twice.
func parsePAXRecords(data []byte) (paxRecords, bool) {
	rec := paxRecords{size: -1}
	seen := map[string]bool{}
	s := string(data)
	for s != "" {
		n, rest, ok := strings.Cut(s, " ")
		length, err := strconv.Atoi(n)
		if !ok || err != nil || length < 5 || length > len(s) || length-len(n)-1 <= 0 {
			return rec, false
		}
		kv := rest[:length-len(n)-1]
		s = s[length:]
		if !strings.HasSuffix(kv, "\n") {
			return rec, false
		}
		k, v, ok := strings.Cut(kv[:len(kv)-1], "=")
		if !ok || k == "" || strings.ContainsRune(v, 0) || strings.ContainsRune(k, 0) ||
			strings.HasPrefix(k, "GNU.sparse") || seen[k] {
			return rec, false
		}
		seen[k] = true
		if !applyPAX(&rec, k, v) {
			return rec, false
		}
	}
	return rec, true
}

// applyPAX applies one record as tar's mergePAX does; false where tar
// would refuse its value.
func applyPAX(rec *paxRecords, k, v string) bool {
	if v == "" {
		return true // tar keeps the header's value
	}
	var err error
	switch k {
	case "path":
		rec.path = v
	case "size":
		rec.size, err = strconv.ParseInt(v, 10, 64)
		return err == nil && rec.size >= 0
	case "uid", "gid":
		_, err = strconv.ParseInt(v, 10, 64)
	case "atime", "mtime", "ctime":
		secs, frac, _ := strings.Cut(v, ".")
		_, err = strconv.ParseInt(secs, 10, 64)
		if strings.Trim(frac, "0123456789") != "" {
			return false
		}
	}
	return err == nil
}
