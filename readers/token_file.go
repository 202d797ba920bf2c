package readers

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/tokens"
	"github.com/actorfeed/actorfeed/tensor"
)

func init() {
	Register(Format{Name: "megatron", Open: openMegatron, Params: func(p string) error { _, err := parseTokenParams(p, false); return err }})
	Register(Format{Name: "llmc", Open: openLLMC, Params: func(p string) error { _, err := parseTokenParams(p, true); return err }})
}

// MaxSeqLen bounds a token corpus's seq_len: a sample of a million tokens
// and one is 16 MiB of int64 tokens and positions.
const MaxSeqLen = 1 << 20

// tokenParams are a token corpus entry's parameters, "seq_len=2048" and,
// for an llm.c file, "eot=50256": the token each document starts with.
type tokenParams struct {
	seqLen int
	eot    int64
}

func parseTokenParams(s string, eot bool) (tokenParams, error) {
	p := tokenParams{eot: -1}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			return p, fmt.Errorf("%q: %s wants an integer", kv, k)
		case k == "seq_len" && (n < 1 || n > MaxSeqLen):
			return p, fmt.Errorf("seq_len %d: want 1 to %d", n, MaxSeqLen)
		case k == "seq_len":
			p.seqLen = int(n)
		case k == "eot" && eot && n >= 0 && n < 1<<32:
			p.eot = n
		case k == "eot" && eot:
			return p, fmt.Errorf("eot %d: want a token, 0 to 2^32-1", n)
		default:
			return p, fmt.Errorf("%q: want seq_len=N%s", kv, map[bool]string{true: " and eot=TOKEN", false: ""}[eot])
		}
	}
	if p.seqLen == 0 {
		return p, fmt.Errorf("%q: no seq_len: a token corpus is read as samples of seq_len+1 tokens", s)
	}
	return p, nil
}

func openMegatron(path string, opts OpenOptions) (Reader, error) {
	p, err := tokenCorpusParams(path, opts, false)
	if err != nil {
		return nil, err
	}
	x, err := tokens.OpenIndexedWith(opts.Open, path)
	if err != nil {
		return nil, err
	}
	return newTokenFile(x, p.seqLen), nil
}

// OpenTokens opens entry, a token corpus as Open names it (a Megatron-LM
// indexed dataset or an llm.c token file), reading its files from what
// source returns for each path instead of from the files. Fault injection
// reads them through it.
func OpenTokens(entry string, source func(path string) (Source, error)) (Reader, error) {
	f, params, path, err := resolve(entry)
	if err != nil {
		return nil, err
	}
	if f.Name != "megatron" && f.Name != "llmc" {
		return nil, fmt.Errorf("%w: %s: OpenTokens reads Megatron-LM indexed datasets and llm.c token files", ErrUnknownFormat, entry)
	}
	p, err := tokenCorpusParams(path, OpenOptions{Params: params}, f.Name == "llmc")
	if err != nil {
		return nil, err
	}
	open := func(path string) (tokens.File, int64, error) {
		s, err := source(path)
		if err != nil {
			return nil, 0, err
		}
		return s, s.Size(), nil
	}
	if f.Name == "llmc" {
		l, err := tokens.OpenLLMCFrom(path, open)
		if err != nil {
			return nil, err
		}
		l.EOT = p.eot
		return newTokenFile(l, p.seqLen), nil
	}
	x, err := tokens.OpenIndexedFrom(path, open)
	if err != nil {
		return nil, err
	}
	return newTokenFile(x, p.seqLen), nil
}

func openLLMC(path string, opts OpenOptions) (Reader, error) {
	p, err := tokenCorpusParams(path, opts, true)
	if err != nil {
		return nil, err
	}
	l, err := tokens.OpenLLMCWith(opts.Open, path)
	if err != nil {
		return nil, err
	}
	l.EOT = p.eot
	return newTokenFile(l, p.seqLen), nil
}

// tokenCorpusParams are the entry's parameters, which a token corpus
// must have; objects are refused.
func tokenCorpusParams(path string, opts OpenOptions, eot bool) (tokenParams, error) {
	if objstore.IsURL(path) {
		return tokenParams{}, fmt.Errorf("%w: %s: token corpora are read from local files (copy the object first)", ErrBadEntry, path)
	}
	p, err := parseTokenParams(opts.Params, eot)
	if err != nil {
		return p, fmt.Errorf("%w: %s: %w", ErrBadEntry, path, err)
	}
	return p, nil
}

// tokenFile reads a token corpus as packed samples (tokens.Sample): record
// i is sample i, its tokens and their positions in their documents, each
// int64 [seq_len+1]. Samples are read by position at the cost of a few
// reads of the tokens and of the index, so a global order reads them. An
// indexed dataset's documents are packed in each epoch's own order once
// SetEpoch names the epoch, as Megatron-LM shuffles its documents each
// epoch (docs/tokens.md).
type tokenFile struct {
	c       tokens.Corpus
	seqLen  int
	samples uint64
	next    uint64
	closed  bool
	epoch   *tokens.EpochOrder // an indexed dataset's documents in the epoch's order (SetEpoch)
	keyed   [2]uint64          // the seed and epoch of epoch
}

func newTokenFile(c tokens.Corpus, seqLen int) *tokenFile {
	return &tokenFile{c: c, seqLen: seqLen, samples: tokens.Samples(c, seqLen)}
}

// Next reads the next sample.
func (r *tokenFile) Next(ctx context.Context) (tensor.Slots, error) {
	if r.next >= r.samples {
		if r.closed {
			return nil, ErrClosed
		}
		return nil, io.EOF
	}
	s, err := r.RecordAt(ctx, int(r.next))
	if err == nil {
		r.next++
	}
	return s, err
}

// RecordAt reads sample n into memory of its own.
func (r *tokenFile) RecordAt(ctx context.Context, n int) (tensor.Slots, error) {
	if r.closed {
		return nil, ErrClosed
	}
	buf, err := tensor.Zeros(tensor.Int64, tensor.Shape{2 * (r.seqLen + 1)}) // aligned for the views
	if err != nil {
		return nil, err
	}
	return r.RecordInto(ctx, n, buf.Bytes())
}

// RecordInto is RecordAt reading into dst, RecordBytes long and aligned to
// 8, which the slots it returns wrap: a gather of many samples then
// allocates nothing a sample.
func (r *tokenFile) RecordInto(ctx context.Context, n int, dst []byte) (tensor.Slots, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n < 0 || uint64(n) >= r.samples {
		return nil, fmt.Errorf("readers: %s: no sample %d of %d", r.c.Name(), n, r.samples)
	}
	if len(dst) != r.RecordBytes() {
		return nil, fmt.Errorf("readers: %s: sample %d: %d bytes to read it into, want %d", r.c.Name(), n, len(dst), r.RecordBytes())
	}
	shape := tensor.Shape{1, r.seqLen + 1}
	var slots tensor.Slots
	var views [2][]int64
	for k := range views {
		t, err := tensor.WrapBytes(tensor.Int64, shape, dst[k*len(dst)/2:(k+1)*len(dst)/2])
		if err != nil {
			return nil, err
		}
		if views[k], err = tensor.View[int64](t); err != nil {
			return nil, err
		}
		slots = append(slots, tensor.LoDTensor{Tensor: t})
	}
	var err error
	if r.epoch != nil {
		err = r.epoch.Sample(uint64(n), views[0], views[1])
	} else {
		_, err = tokens.Sample(r.c, uint64(n), views[0], views[1], nil)
	}
	if err != nil {
		return nil, err
	}
	return slots, nil
}

// SetEpoch packs an indexed dataset's documents in the order of epoch
// under seed from the next sample on; an llm.c file, which has no
// document index, keeps its own order. The pipeline sets it from its
// shuffle's seed and the epoch a reader reads.
func (r *tokenFile) SetEpoch(seed, epoch uint64) {
	if x, ok := r.c.(*tokens.Indexed); ok && (r.epoch == nil || r.keyed != [2]uint64{seed, epoch}) {
		r.epoch, r.keyed = x.EpochOrder(seed, epoch), [2]uint64{seed, epoch}
	}
}

// Addressable is nil: every sample is read alone.
func (r *tokenFile) Addressable() error {
	if r.closed {
		return ErrClosed
	}
	return nil
}

// RecordBytes is a sample's bytes in memory: its two slots of seq_len+1
// int64.
func (r *tokenFile) RecordBytes() int { return 2 * 8 * (r.seqLen + 1) }

// Count is the corpus's samples at its seq_len.
func (r *tokenFile) Count() (uint64, error) { return r.samples, nil }

// Seek moves to sample n.
func (r *tokenFile) Seek(n int) error {
	if n < 0 || uint64(n) > r.samples {
		return fmt.Errorf("readers: %s: no sample %d of %d", r.c.Name(), n, r.samples)
	}
	r.next = uint64(n)
	return nil
}

// SlotNames names the two slots.
func (r *tokenFile) SlotNames() []string { return []string{"tokens", "positions"} }

// Reset starts over.
func (r *tokenFile) Reset() error {
	if r.closed {
		return ErrClosed
	}
	r.next = 0
	return nil
}

// Close closes the corpus's files.
func (r *tokenFile) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.next = r.samples
	return r.c.Close()
}
