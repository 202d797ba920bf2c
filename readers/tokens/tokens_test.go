package tokens_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tokens"
)

// documents makes n documents of 1 to 3 sequences of 0 to 40 tokens below
// vocab, from seed.
func documents(seed uint64, n int, vocab int64) [][][]int64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	docs := make([][][]int64, n)
	for d := range docs {
		docs[d] = make([][]int64, 1+rng.IntN(3))
		for s := range docs[d] {
			seq := make([]int64, rng.IntN(41))
			for i := range seq {
				seq[i] = rng.Int64N(vocab)
			}
			docs[d][s] = seq
		}
	}
	return docs
}

// writeIndexed writes the oracle's dataset of docs under dir as PREFIX.idx
// and PREFIX.bin and returns PREFIX.
func writeIndexed(t *testing.T, o *oracle.Oracle, dtype string, docs [][][]int64) string {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "corpus_text_document")
	o.WriteIndexed(t, prefix, dtype, docs)
	return prefix
}

// Every field of an indexed dataset NumPy writes as Megatron-LM's builder
// does is read back, for every dtype Megatron-LM writes: the type, the
// counts, each document's sequences, each sequence's start and length,
// and its tokens.
func TestIndexedReadsWhatMegatronWrites(t *testing.T) {
	o := oracle.Start(t)
	for _, e := range tokens.Elements {
		t.Run(e.Name, func(t *testing.T) {
			vocab := int64(1) << min(8*e.Size-1, 20)
			docs := documents(uint64(e.Code), 30, vocab)
			prefix := writeIndexed(t, o, e.Name, docs)
			for _, name := range []string{prefix, prefix + ".bin", prefix + ".idx"} {
				x, err := tokens.OpenIndexed(name)
				require.NoError(t, err)
				checkIndexed(t, x, e, docs)
				require.NoError(t, x.Close())
			}
		})
	}
}

func checkIndexed(t *testing.T, x *tokens.Indexed, e tokens.Element, docs [][][]int64) {
	t.Helper()
	require.Equal(t, e, x.Element())
	require.Equal(t, len(docs), x.Documents())
	s, at := 0, uint64(0)
	for d, doc := range docs {
		first, end, err := x.Document(d)
		require.NoError(t, err)
		require.Equal(t, [2]int{s, s + len(doc)}, [2]int{first, end}, "document %d", d)
		for _, seq := range doc {
			start, length, err := x.Sequence(s)
			require.NoError(t, err)
			require.Equal(t, [2]uint64{at, uint64(len(seq))}, [2]uint64{start, length}, "sequence %d", s)
			got := make([]int64, len(seq))
			require.NoError(t, x.ReadTokens(got, start))
			require.Equal(t, seq, got, "sequence %d", s)
			s, at = s+1, at+uint64(len(seq))
		}
	}
	require.Equal(t, s, x.Sequences())
	require.Equal(t, at, x.Tokens())
}

// A packed sample is seqLen+1 consecutive tokens of the corpus, across
// sequences, its last the next sample's first; its positions restart at
// every sequence that starts inside it, and starts says where.
func TestSamplesPackSequences(t *testing.T) {
	o := oracle.Start(t)
	docs := documents(7, 2000, 50000) // past IndexStride sequences
	x, err := tokens.OpenIndexed(writeIndexed(t, o, "uint16", docs))
	require.NoError(t, err)
	defer x.Close()
	require.Greater(t, x.Sequences(), 2*tokens.IndexStride)
	var all []int64
	starts := map[uint64]bool{}
	for _, doc := range docs {
		for _, seq := range doc {
			starts[uint64(len(all))] = true
			all = append(all, seq...)
		}
	}
	for _, seqLen := range []int{1, 7, 64, 2049, len(all) - 1} {
		n := tokens.Samples(x, seqLen)
		require.Equal(t, uint64((len(all)-1)/seqLen), n)
		toks, pos := make([]int64, seqLen+1), make([]int64, seqLen+1)
		for i := range n {
			inside, err := tokens.Sample(x, i, toks, pos, nil)
			require.NoError(t, err)
			from := int(i) * seqLen
			require.Equal(t, all[from:from+seqLen+1], toks, "sample %d of %d tokens", i, seqLen)
			require.Equal(t, wantPositions(starts, from, seqLen+1), pos, "sample %d of %d tokens", i, seqLen)
			for _, k := range inside {
				require.Zero(t, pos[k])
				require.NotZero(t, k)
			}
		}
		_, err := tokens.Sample(x, n, toks, pos, nil)
		require.Error(t, err, "no sample past the last")
	}
}

// wantPositions is the positions of tokens [from, from+n) of a corpus
// whose documents start at the offsets in starts.
func wantPositions(starts map[uint64]bool, from, n int) []int64 {
	pos := make([]int64, n)
	p := int64(0)
	for k := range pos {
		if k > 0 && starts[uint64(from+k)] {
			p = 0
		}
		pos[k] = p
		p++
	}
	return pos
}

// Every field of an llm.c token file NumPy writes as llm.c's
// write_datafile does is read back, for GPT-2's uint16 tokens and
// LLaMA-3's uint32; with EOT set, a sample's positions restart at it.
func TestLLMCReadsWhatLLMCWrites(t *testing.T) {
	o := oracle.Start(t)
	for model, vocab := range map[string]int64{"gpt-2": 50257, "llama-3": 128256} {
		t.Run(model, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(vocab), 2))
			toks := make([]int64, 5000)
			for i := range toks {
				toks[i] = rng.Int64N(vocab)
			}
			b, err := o.LLMCWrite(model, toks)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "train.bin")
			require.NoError(t, os.WriteFile(path, b, 0o644))
			l, err := tokens.OpenLLMC(path)
			require.NoError(t, err)
			defer l.Close()
			require.Equal(t, uint64(len(toks)), l.Tokens())
			got := make([]int64, len(toks))
			require.NoError(t, l.ReadTokens(got, 0))
			require.Equal(t, toks, got)
			eot := toks[100]
			l.EOT = eot
			s, pos := make([]int64, 101), make([]int64, 101)
			_, err = tokens.Sample(l, 1, s, pos, nil)
			require.NoError(t, err)
			require.Equal(t, int64(0), pos[0], "the sample starts at token 100, an EOT")
			starts := map[uint64]bool{}
			for i, tok := range toks {
				if tok == eot {
					starts[uint64(i)] = true
				}
			}
			require.Equal(t, wantPositions(starts, 100, 101), pos)
		})
	}
}

// idxOf is the .idx bytes of a dataset of sequences of the given
// lengths, uint16, one document each, with its .bin's size.
func idxOf(lengths ...int32) ([]byte, int64) {
	le := binary.LittleEndian
	b := append([]byte("MMIDIDX\x00\x00"), make([]byte, 25)...)
	le.PutUint64(b[9:], 1)
	b[17] = 8
	le.PutUint64(b[18:], uint64(len(lengths)))
	le.PutUint64(b[26:], uint64(len(lengths)+1))
	var ptr int64
	for _, n := range lengths {
		b = le.AppendUint32(b, uint32(n))
	}
	for _, n := range lengths {
		b = le.AppendUint64(b, uint64(ptr))
		ptr += 2 * int64(n)
	}
	for d := range len(lengths) + 1 {
		b = le.AppendUint64(b, uint64(d))
	}
	return b, ptr
}

// Hostile or damaged indexes are refused by name before anything is sized
// by them: the error names the .idx, matches format.ErrCorrupt and says
// what is wrong.
func TestIndexedRefusesDamage(t *testing.T) {
	le := binary.LittleEndian
	good, binSize := idxOf(3, 5, 0, 4)
	lengthsAt, pointersAt := 34, 34+4*4
	docsAt := pointersAt + 8*4
	edit := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	for name, c := range map[string]struct {
		idx  []byte
		bin  int64
		says string
	}{
		"short":               {good[:20], binSize, "shorter than the 34 of a header"},
		"magic":               {edit(func(b []byte) []byte { b[0] = 'X'; return b }), binSize, "not an indexed dataset's index"},
		"version":             {edit(func(b []byte) []byte { b[9] = 2; return b }), binSize, "version 2"},
		"dtype":               {edit(func(b []byte) []byte { b[17] = 9; return b }), binSize, "dtype code 9"},
		"huge sequence count": {edit(func(b []byte) []byte { le.PutUint64(b[18:], 1<<62); return b }), binSize, "do not fit"},
		"huge document count": {edit(func(b []byte) []byte { le.PutUint64(b[26:], 1<<62); return b }), binSize, "do not fit"},
		"trailing bytes":      {append(slices.Clone(good), make([]byte, 16)...), binSize, "after the document indices"},
		"sequence modes":      {append(slices.Clone(good), make([]byte, 4)...), binSize, "multimodal"},
		"negative length":     {edit(func(b []byte) []byte { le.PutUint32(b[lengthsAt+4*3:], 1<<31); return b }), binSize, "has -2147483648 tokens"},
		"unsorted pointers":   {edit(func(b []byte) []byte { le.PutUint64(b[pointersAt+8:], 2); return b }), binSize, "sequence 1 starts at byte 2"},
		"past the .bin":       {good, binSize - 2, "past the end"},
		"longer .bin":         {good, binSize + 2, "the .bin is not the .idx's"},
		"lengths overflow":    {edit(func(b []byte) []byte { le.PutUint32(b[lengthsAt:], 1<<31-1); return b }), binSize, "past the end"},
		"documents not at 0":  {edit(func(b []byte) []byte { le.PutUint64(b[docsAt:], 1); return b }), binSize, "start at 1, not 0"},
		"documents backwards": {edit(func(b []byte) []byte { le.PutUint64(b[docsAt+16:], 0); return b }), binSize, "document index 2 is 0, after 1"},
		"documents past":      {edit(func(b []byte) []byte { le.PutUint64(b[docsAt+8:], 9); return b }), binSize, "of 4 sequences"},
		"documents short":     {edit(func(b []byte) []byte { le.PutUint64(b[docsAt+32:], 3); return b }), binSize, "ends at sequence 3 of 4"},
	} {
		t.Run(name, func(t *testing.T) {
			prefix := filepath.Join(t.TempDir(), "d")
			require.NoError(t, os.WriteFile(prefix+".idx", c.idx, 0o644))
			require.NoError(t, os.WriteFile(prefix+".bin", make([]byte, c.bin), 0o644))
			_, err := tokens.OpenIndexed(prefix)
			require.ErrorIs(t, err, format.ErrCorrupt)
			require.ErrorContains(t, err, prefix+".idx")
			require.ErrorContains(t, err, c.says)
		})
	}
}

// llm.c headers that do not describe their file are refused by name.
func TestLLMCRefusesDamage(t *testing.T) {
	le := binary.LittleEndian
	header := func(magic, version, count int32, tokens int) []byte {
		b := make([]byte, 1024+2*tokens)
		le.PutUint32(b, uint32(magic))
		le.PutUint32(b[4:], uint32(version))
		le.PutUint32(b[8:], uint32(count))
		return b
	}
	for name, c := range map[string]struct {
		file []byte
		says string
	}{
		"short":           {header(20240520, 1, 0, 0)[:100], "shorter than the 1024 of a header"},
		"magic":           {header(1, 1, 0, 0), "not an llm.c token file"},
		"version":         {header(20240520, 2, 0, 0), "llm.c writes version 1"},
		"negative count":  {header(20240520, 1, -3, 0), "-3 tokens"},
		"count too large": {header(20240520, 1, 10, 9), "the header declares 10 uint16 tokens"},
		"llama size":      {header(20240801, 7, 10, 10), "10 uint32 tokens, 1064 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "train.bin")
			require.NoError(t, os.WriteFile(path, c.file, 0o644))
			_, err := tokens.OpenLLMC(path)
			require.ErrorIs(t, err, format.ErrCorrupt)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, c.says)
		})
	}
}

// failingFile is a corpus file whose reads fail once fail is set.
type failingFile struct {
	*os.File
	fail *bool
}

func (f failingFile) ReadAt(p []byte, off int64) (int, error) {
	if *f.fail {
		return 0, &os.PathError{Op: "read", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.ReadAt(p, off)
}

// OpenIndexedFrom reads the corpus through the files open gives, as fault
// injection does: the same dataset as OpenIndexed, and a read that fails
// there is an error naming the .bin and the offset.
func TestIndexedReadsThroughTheFilesItIsGiven(t *testing.T) {
	o := oracle.Start(t)
	docs := documents(7, 30, 1000)
	prefix := writeIndexed(t, o, "int32", docs)
	fail := false
	var opened []string
	x, err := tokens.OpenIndexedFrom(prefix, func(path string) (tokens.File, int64, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			return nil, 0, errors.Join(err, f.Close())
		}
		opened = append(opened, path)
		return failingFile{f, &fail}, st.Size(), nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{prefix + ".idx", prefix + ".bin"}, opened)
	checkIndexed(t, x, tokens.Elements[3], docs)
	fail = true
	err = x.ReadTokens(make([]int64, 4), 2)
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorContains(t, err, prefix+".bin")
	require.NoError(t, x.Close())
}
