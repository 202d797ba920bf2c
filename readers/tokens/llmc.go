package tokens

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/actorfeed/actorfeed/readers/format"
)

// llm.c's token files: a header of 256 little-endian int32, the first
// three the magic, the version and the token count, then the tokens
// (dev/data/data_common.py, write_datafile).
const (
	llmcHeaderSize = 256 * 4
	llmcMagicGPT2  = 20240520 // version 1, uint16 tokens
	llmcMagicLlama = 20240801 // version 7, uint32 tokens
)

// LLMC is an open llm.c token file. It holds no document index: where
// the writer began every document with an end-of-text token (llm.c's
// scripts do), that token marks the documents (EOT). It is safe for
// concurrent use.
type LLMC struct {
	path   string
	f      File
	elem   Element
	tokens uint64
	// EOT, when at least 0, is the token each document starts with: a
	// sample's positions restart at it.
	EOT int64
}

// OpenLLMC opens an llm.c token file, checking its header against the
// file's size.
func OpenLLMC(path string) (*LLMC, error) { return OpenLLMCWith(nil, path) }

// OpenLLMCWith is OpenLLMC opening the file with open.
func OpenLLMCWith(open format.Opener, path string) (*LLMC, error) {
	return OpenLLMCFrom(path, func(path string) (File, int64, error) {
		return format.OpenFileWith(open, "llmc", path)
	})
}

// OpenLLMCFrom is OpenLLMC reading the file from what open gives for it
// (the file and its size): fault injection reads it through it.
func OpenLLMCFrom(path string, open func(path string) (File, int64, error)) (*LLMC, error) {
	f, size, err := open(path)
	if err != nil {
		return nil, err
	}
	head := make([]byte, llmcHeaderSize)
	if _, err := f.ReadAt(head, 0); err != nil {
		f.Close()
		if errors.Is(err, io.EOF) {
			err = format.Truncated("%d bytes, shorter than the %d of a header", size, llmcHeaderSize)
		}
		return nil, &format.Error{Format: "llmc", File: path, Chunk: -1, Record: -1, Offset: 0, Err: err}
	}
	elem, tokens, err := parseLLMCHeader(head, size)
	if err != nil {
		f.Close()
		return nil, &format.Error{Format: "llmc", File: path, Chunk: -1, Record: -1, Offset: 0, Err: err}
	}
	return &LLMC{path: path, f: f, elem: elem, tokens: tokens, EOT: -1}, nil
}

// parseLLMCHeader reads an llm.c header: its token type and count, which
// must be what the file holds after the header.
func parseLLMCHeader(b []byte, size int64) (Element, uint64, error) {
	le := binary.LittleEndian
	magic, version, count := int32(le.Uint32(b)), int32(le.Uint32(b[4:])), int32(le.Uint32(b[8:]))
	var elem Element
	switch {
	case magic == llmcMagicGPT2 && version == 1:
		elem, _ = elementOf(8) // uint16
	case magic == llmcMagicLlama && version == 7:
		elem = uint32Element
	case magic == llmcMagicGPT2 || magic == llmcMagicLlama:
		return Element{}, 0, format.Corrupt("magic %d with version %d: llm.c writes version %d with it", magic, version, map[int32]int{llmcMagicGPT2: 1, llmcMagicLlama: 7}[magic])
	default:
		return Element{}, 0, format.Corrupt("magic %d, not llm.c's %d or %d: not an llm.c token file", magic, llmcMagicGPT2, llmcMagicLlama)
	}
	if count < 0 {
		return Element{}, 0, format.Corrupt("%d tokens", count)
	}
	if want := int64(llmcHeaderSize) + int64(count)*int64(elem.Size); want != size {
		return Element{}, 0, format.Corrupt("the header declares %d %s tokens, %d bytes with it, and the file has %d", count, elem.Name, want, size)
	}
	return elem, uint64(count), nil
}

// Name is the file's path.
func (l *LLMC) Name() string { return l.path }

// Element is the tokens' type: uint16 or uint32.
func (l *LLMC) Element() Element { return l.elem }

// Tokens is how many tokens the file holds.
func (l *LLMC) Tokens() uint64 { return l.tokens }

// ReadTokens reads tokens [from, from+len(dst)) into dst, with one pread.
func (l *LLMC) ReadTokens(dst []int64, from uint64) error {
	return readTokens(l.f, l.path, "llmc", llmcHeaderSize, l.elem, l.tokens, dst, from)
}

// starts is where EOT tokens stand in toks, after its first.
func (l *LLMC) starts(dst []uint64, from uint64, toks []int64) ([]uint64, error) {
	if l.EOT < 0 {
		return dst, nil
	}
	for k, t := range toks[1:] {
		if t == l.EOT {
			dst = append(dst, from+uint64(k)+1)
		}
	}
	return dst, nil
}

// Close closes the file.
func (l *LLMC) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("llmc: %s: %w", l.path, err)
	}
	return nil
}
