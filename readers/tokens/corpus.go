package tokens

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/actorfeed/actorfeed/readers/format"
)

// Corpus is a token corpus read by position: an indexed dataset or an
// llm.c token file.
type Corpus interface {
	// Name names the corpus in errors: its prefix or file.
	Name() string
	Element() Element
	// Tokens is how many tokens the corpus holds.
	Tokens() uint64
	// ReadTokens reads tokens [from, from+len(dst)) into dst. Tokens of a
	// floating-point type are read where they are whole numbers.
	ReadTokens(dst []int64, from uint64) error
	// starts appends to dst the corpus offsets of the documents that
	// start inside the tokens toks, read from from: after from, before
	// its end.
	starts(dst []uint64, from uint64, toks []int64) ([]uint64, error)
	Close() error
}

// maxReadTokens bounds one ReadTokens: 2^24 tokens, 128 MiB of int64.
const maxReadTokens = 1 << 24

// readTokens reads tokens [from, from+len(dst)) of a file whose tokens
// start at byte base, with one pread into a reused buffer.
func readTokens(f io.ReaderAt, path, formatName string, base int64, e Element, tokens uint64, dst []int64, from uint64) error {
	n := uint64(len(dst))
	if n > maxReadTokens || from > tokens || n > tokens-from {
		return fmt.Errorf("%s: %s: tokens %d to %d of %d", formatName, path, from, from+n, tokens)
	}
	off := base + int64(from)*int64(e.Size)
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := slices.Grow((*bp)[:0], len(dst)*e.Size)[:len(dst)*e.Size]
	*bp = buf
	if _, err := f.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			err = format.Truncated("cut off: the file shrank since it was opened")
		}
		return &format.Error{Format: formatName, File: path, Chunk: -1, Record: -1, Offset: off, Err: err}
	}
	if err := e.decode(dst, buf); err != nil {
		return &format.Error{Format: formatName, File: path, Chunk: -1, Record: -1, Offset: off, Err: format.Corrupt("%s tokens are token ids: %v", e.Name, err)}
	}
	return nil
}

// readBuffers are the buffers readTokens reads into before it decodes
// them: reused, so that a sample allocates nothing for its reads.
var readBuffers = sync.Pool{New: func() any { return new([]byte) }}

// Samples is how many packed samples of seqLen+1 tokens an epoch of c
// holds: sample i is tokens [i*seqLen, i*seqLen+seqLen+1), so that each
// sample's last token is the next one's first (its target), as Megatron-LM's
// GPTDataset packs them.
func Samples(c Corpus, seqLen int) uint64 {
	if seqLen < 1 || c.Tokens() == 0 {
		return 0
	}
	return (c.Tokens() - 1) / uint64(seqLen)
}

// Sample reads packed sample i (see Samples) into tokens, and into
// positions each token's position in its document counted from the
// sample's start: 0 at the sample's first token and at every document
// that starts inside it, as Megatron-LM's reset position ids are. Both
// must hold seqLen+1 values. starts, when not nil, gets the offsets in
// the sample of the documents that start inside it (FlashAttention's
// cumulative lengths less the 0 and the end).
func Sample(c Corpus, i uint64, tokens, positions []int64, starts []int) ([]int, error) {
	seqLen := len(tokens) - 1
	if seqLen < 1 || len(positions) != len(tokens) {
		return starts, fmt.Errorf("tokens: a sample of %d tokens and %d positions", len(tokens), len(positions))
	}
	if i >= Samples(c, seqLen) {
		return starts, fmt.Errorf("tokens: %s: no sample %d of %d at %d tokens", c.Name(), i, Samples(c, seqLen), seqLen)
	}
	from := i * uint64(seqLen)
	if err := c.ReadTokens(tokens, from); err != nil {
		return starts, err
	}
	var at [16]uint64
	docs, err := c.starts(at[:0], from, tokens)
	if err != nil {
		return starts, err
	}
	next, p := 0, int64(0)
	for k := range positions {
		if next < len(docs) && from+uint64(k) == docs[next] {
			p, next = 0, next+1
			starts = append(starts, k)
		}
		positions[k] = p
		p++
	}
	return starts, nil
}
