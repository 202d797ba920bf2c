package tokens

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/actorfeed/actorfeed/readers/format"
)

// idxMagic opens every Megatron-LM .idx file.
const idxMagic = "MMIDIDX\x00\x00"

// idxHeaderSize is the .idx header's size: magic, version (uint64), dtype
// code (uint8), sequence count and document count (uint64 each).
const idxHeaderSize = len(idxMagic) + 8 + 1 + 8 + 8

// IndexStride is how many sequences apart are those whose first token an
// open indexed dataset keeps in memory: finding the sequences that start
// inside a sample (Sample) reads at most IndexStride offsets of the .idx
// before them, and the memory kept is 8 bytes for every IndexStride
// sequences.
const IndexStride = 1024

// Indexed is an open Megatron-LM indexed dataset: PREFIX.bin and
// PREFIX.idx. Its sequences' tokens lie one after the other in the .bin
// (OpenIndexed checks that the index says so), so token t of the corpus is
// at byte t times the element's size. It is safe for concurrent use.
type Indexed struct {
	idxPath, binPath string
	idx, bin         File
	elem             Element
	sequences        uint64
	documents        uint64 // entries of document_indices: documents + 1
	tokens           uint64
	sampled          []uint64 // the first token of sequences 0, IndexStride, 2*IndexStride, ...
	// groupFirst is the first token of each group of DocumentGroup
	// sequences, which an epoch's document order permutes (EpochOrder),
	// and then the corpus's tokens: group g is tokens [groupFirst[g],
	// groupFirst[g+1]).
	groupFirst []uint64
}

// indexHeader is what a .idx header declares.
type indexHeader struct {
	elem                 Element
	sequences, documents uint64
}

// Offsets in the .idx of its three arrays.
func (h indexHeader) lengthsAt() int64   { return int64(idxHeaderSize) }
func (h indexHeader) pointersAt() int64  { return h.lengthsAt() + 4*int64(h.sequences) }
func (h indexHeader) documentsAt() int64 { return h.pointersAt() + 8*int64(h.sequences) }

// Prefix is the PREFIX of a dataset named by PREFIX, PREFIX.bin or
// PREFIX.idx.
func Prefix(path string) string {
	for _, ext := range []string{".bin", ".idx"} {
		if p, ok := strings.CutSuffix(path, ext); ok {
			return p
		}
	}
	return path
}

// OpenIndexed opens the indexed dataset PREFIX.bin and PREFIX.idx (path
// may name either, or the prefix), checking its whole index (see the
// package doc).
func OpenIndexed(path string) (*Indexed, error) {
	return OpenIndexedWith(nil, path)
}

// OpenIndexedWith is OpenIndexed opening the files with open.
func OpenIndexedWith(open format.Opener, path string) (*Indexed, error) {
	return OpenIndexedFrom(path, func(path string) (File, int64, error) {
		return format.OpenFileWith(open, "megatron", path)
	})
}

// File is an open file of a corpus as its readers use it: a corpus is
// read by position only.
type File interface {
	io.ReaderAt
	io.Closer
}

// OpenIndexedFrom is OpenIndexed reading PREFIX.idx and PREFIX.bin from
// what open gives for each (the file and its size): fault injection reads
// them through it.
func OpenIndexedFrom(path string, open func(path string) (File, int64, error)) (*Indexed, error) {
	prefix := Prefix(path)
	x := &Indexed{idxPath: prefix + ".idx", binPath: prefix + ".bin"}
	idx, idxSize, err := open(x.idxPath)
	if err != nil {
		return nil, err
	}
	x.idx = idx
	bin, binSize, err := open(x.binPath)
	if err != nil {
		idx.Close()
		return nil, err
	}
	x.bin = bin
	if err := x.check(idxSize, binSize); err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

// check reads and checks the index against the files' sizes.
func (x *Indexed) check(idxSize, binSize int64) error {
	head := make([]byte, idxHeaderSize)
	if _, err := x.idx.ReadAt(head, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return x.fail(0, -1, format.Truncated("%d bytes, shorter than the %d of a header", idxSize, idxHeaderSize))
		}
		return x.fail(0, -1, err)
	}
	h, err := parseIndexHeader(head, idxSize)
	if err != nil {
		return x.fail(0, -1, err)
	}
	x.elem, x.sequences, x.documents = h.elem, h.sequences, h.documents
	if err := x.checkSequences(h, binSize); err != nil {
		return err
	}
	return x.checkDocuments(h)
}

// parseIndexHeader reads a .idx header, checking its counts against the
// file's size before anything is sized by them.
func parseIndexHeader(b []byte, idxSize int64) (indexHeader, error) {
	le := binary.LittleEndian
	if string(b[:len(idxMagic)]) != idxMagic {
		return indexHeader{}, format.Corrupt("magic %q, not Megatron-LM's %q: not an indexed dataset's index", b[:len(idxMagic)], idxMagic)
	}
	b = b[len(idxMagic):]
	if v := le.Uint64(b); v != 1 {
		return indexHeader{}, format.Corrupt("version %d: only version 1 is read", v)
	}
	elem, ok := elementOf(b[8])
	if !ok {
		return indexHeader{}, format.Corrupt("dtype code %d: not one of Megatron-LM's 1 to 8", b[8])
	}
	h := indexHeader{elem: elem, sequences: le.Uint64(b[9:]), documents: le.Uint64(b[17:])}
	room := uint64(idxSize - int64(idxHeaderSize))
	if h.sequences > room/12 || h.documents > room/8 {
		return indexHeader{}, format.Corrupt("%d sequences and %d document indices do not fit the file's %d bytes", h.sequences, h.documents, idxSize)
	}
	switch rest := room - 12*h.sequences; {
	case rest < 8*h.documents:
		return indexHeader{}, format.Corrupt("%d sequences and %d document indices do not fit the file's %d bytes", h.sequences, h.documents, idxSize)
	case rest-8*h.documents == h.sequences && h.sequences > 0:
		return indexHeader{}, format.Corrupt("the index holds sequence modes (a multimodal dataset), which are not read")
	case rest != 8*h.documents:
		return indexHeader{}, format.Corrupt("%d bytes after the document indices, where the header declares none", rest-8*h.documents)
	case h.documents == 0:
		return indexHeader{}, format.Corrupt("no document indices: there is always a leading 0")
	}
	return h, nil
}

// checkBlock is how many entries of an array the checks read at a time.
const checkBlock = 4096

// checkSequences checks that every length is non-negative and every
// pointer the running sum of the lengths before it, in bytes, ending at
// the .bin's size; it samples the sequences' first tokens.
func (x *Indexed) checkSequences(h indexHeader, binSize int64) error {
	lengths, pointers := make([]byte, 4*checkBlock), make([]byte, 8*checkBlock)
	size := uint64(h.elem.Size)
	var want uint64 // bytes of the sequences before
	for first := uint64(0); first < h.sequences; first += checkBlock {
		n := min(checkBlock, h.sequences-first)
		if err := x.readIndex(lengths[:4*n], h.lengthsAt()+4*int64(first)); err != nil {
			return err
		}
		if err := x.readIndex(pointers[:8*n], h.pointersAt()+8*int64(first)); err != nil {
			return err
		}
		for i := range n {
			s := first + i
			length := int32(binary.LittleEndian.Uint32(lengths[4*i:]))
			if p := binary.LittleEndian.Uint64(pointers[8*i:]); p != want {
				return x.fail(h.pointersAt()+8*int64(s), int(s), format.Corrupt("sequence %d starts at byte %d of %s, not at %d, where the sequences before it end", s, int64(p), x.binPath, want))
			}
			if length < 0 {
				return x.fail(h.lengthsAt()+4*int64(s), int(s), format.Corrupt("sequence %d has %d tokens", s, length))
			}
			if s%IndexStride == 0 {
				x.sampled = append(x.sampled, want/size)
			}
			if s%DocumentGroup == 0 {
				x.groupFirst = append(x.groupFirst, want/size)
			}
			if want += uint64(length) * size; want > uint64(binSize) {
				return x.fail(h.lengthsAt()+4*int64(s), int(s), format.Corrupt("sequence %d ends at byte %d, past the end of %s (%d bytes)", s, want, x.binPath, binSize))
			}
		}
	}
	if want != uint64(binSize) {
		return x.fail(-1, -1, format.Corrupt("the sequences end at byte %d of %s, which has %d: the .bin is not the .idx's", want, x.binPath, binSize))
	}
	x.tokens = want / size
	x.groupFirst = append(x.groupFirst, x.tokens)
	return nil
}

// checkDocuments checks document_indices: 0, then non-decreasing sequence
// indices ending at the sequence count.
func (x *Indexed) checkDocuments(h indexHeader) error {
	buf := make([]byte, 8*checkBlock)
	var last uint64
	for first := uint64(0); first < h.documents; first += checkBlock {
		n := min(checkBlock, h.documents-first)
		if err := x.readIndex(buf[:8*n], h.documentsAt()+8*int64(first)); err != nil {
			return err
		}
		for i := range n {
			d, at := binary.LittleEndian.Uint64(buf[8*i:]), h.documentsAt()+8*int64(first+i)
			switch {
			case first+i == 0 && d != 0:
				return x.fail(at, -1, format.Corrupt("document indices start at %d, not 0", int64(d)))
			case d < last || d > h.sequences:
				return x.fail(at, -1, format.Corrupt("document index %d is %d, after %d, of %d sequences", first+i, int64(d), last, h.sequences))
			}
			last = d
		}
	}
	if last != h.sequences {
		return x.fail(h.documentsAt()+8*int64(h.documents-1), -1, format.Corrupt("the last document ends at sequence %d of %d", last, h.sequences))
	}
	return nil
}

// readIndex reads len(b) bytes of the .idx at off.
func (x *Indexed) readIndex(b []byte, off int64) error {
	if _, err := x.idx.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			err = format.Truncated("cut off")
		}
		return x.fail(off, -1, err)
	}
	return nil
}

// fail locates err in the .idx: at byte off (-1: unknown), in sequence
// seq (-1: none).
func (x *Indexed) fail(off int64, seq int, err error) error {
	return &format.Error{Format: "megatron", File: x.idxPath, Chunk: -1, Record: seq, Offset: off, Err: err}
}

// Name is the dataset's prefix.
func (x *Indexed) Name() string { return strings.TrimSuffix(x.idxPath, ".idx") }

// Element is the tokens' type.
func (x *Indexed) Element() Element { return x.elem }

// Tokens is how many tokens the corpus holds.
func (x *Indexed) Tokens() uint64 { return x.tokens }

// Sequences is how many sequences the index holds.
func (x *Indexed) Sequences() int { return int(x.sequences) }

// Documents is how many documents the index holds: document_indices'
// entries less the leading 0.
func (x *Indexed) Documents() int { return int(x.documents) - 1 }

// Document is the sequences [first, end) of document d.
func (x *Indexed) Document(d int) (first, end int, err error) {
	if d < 0 || d >= x.Documents() {
		return 0, 0, fmt.Errorf("megatron: %s: no document %d of %d", x.idxPath, d, x.Documents())
	}
	var b [16]byte
	h := indexHeader{sequences: x.sequences}
	if err := x.readIndex(b[:], h.documentsAt()+8*int64(d)); err != nil {
		return 0, 0, err
	}
	return int(binary.LittleEndian.Uint64(b[:])), int(binary.LittleEndian.Uint64(b[8:])), nil
}

// Sequence is sequence s: its first token in the corpus and its length.
func (x *Indexed) Sequence(s int) (start, length uint64, err error) {
	if s < 0 || uint64(s) >= x.sequences {
		return 0, 0, fmt.Errorf("megatron: %s: no sequence %d of %d", x.idxPath, s, x.sequences)
	}
	h := indexHeader{sequences: x.sequences}
	var b [8]byte
	if err := x.readIndex(b[:], h.pointersAt()+8*int64(s)); err != nil {
		return 0, 0, err
	}
	start = binary.LittleEndian.Uint64(b[:]) / uint64(x.elem.Size)
	if err := x.readIndex(b[:4], h.lengthsAt()+4*int64(s)); err != nil {
		return 0, 0, err
	}
	return start, uint64(binary.LittleEndian.Uint32(b[:4])), nil
}

// starts appends to dst the first tokens of the sequences that start in
// (from, from+len(toks)), in order: the document boundaries inside a
// sample.
func (x *Indexed) starts(dst []uint64, from uint64, toks []int64) ([]uint64, error) {
	to := from + uint64(len(toks))
	k := sort.Search(len(x.sampled), func(k int) bool { return x.sampled[k] > from }) - 1
	h := indexHeader{sequences: x.sequences}
	var block [8 * 256]byte
	for s := uint64(max(k, 0)) * IndexStride; s < x.sequences; {
		n := min(256, x.sequences-s)
		if err := x.readIndex(block[:8*n], h.pointersAt()+8*int64(s)); err != nil {
			return dst, err
		}
		for i := range n {
			switch t := binary.LittleEndian.Uint64(block[8*i:]) / uint64(x.elem.Size); {
			case t >= to:
				return dst, nil
			case t > from && (len(dst) == 0 || dst[len(dst)-1] != t):
				dst = append(dst, t)
			}
		}
		s += n
	}
	return dst, nil
}

// ReadTokens reads tokens [from, from+len(dst)) of the corpus into dst,
// with one pread of the .bin.
func (x *Indexed) ReadTokens(dst []int64, from uint64) error {
	return readTokens(x.bin, x.binPath, "megatron", 0, x.elem, x.tokens, dst, from)
}

// Close closes the files.
func (x *Indexed) Close() error {
	return errors.Join(x.idx.Close(), x.bin.Close())
}
