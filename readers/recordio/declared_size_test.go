package recordio

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/format"
)

// payloadOf compresses data as the writer does.
func payloadOf(t *testing.T, comp Compressor, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch comp {
	case Snappy:
		w := snappy.NewBufferedWriter(&buf)
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case Gzip:
		w := gzip.NewWriter(&buf)
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	return buf.Bytes()
}

func TestDeclaredSizeIsTheDecodedSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300_000) // incompressible: stored as uncompressed blocks
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	repeated := bytes.Repeat([]byte("actorfeed "), 30_000) // compressed blocks
	mixed := append(append([]byte{}, repeated[:100_000]...), random[:100_000]...)
	for _, comp := range []Compressor{Snappy, Gzip} {
		for name, data := range map[string][]byte{"empty": nil, "small": []byte("abc"), "random": random, "repeated": repeated, "mixed": mixed} {
			require.Equal(t, int64(len(data)), declaredSize(comp, payloadOf(t, comp, data)), "%v %s", comp, name)
		}
	}
	require.Zero(t, declaredSize(NoCompression, random))
}

func TestDeclaredSizeOfDamagedFramingIsUnknown(t *testing.T) {
	p := payloadOf(t, Snappy, bytes.Repeat([]byte("actorfeed "), 30_000))
	for _, cut := range []int{1, 3, 11, len(p) / 2, len(p) - 1} {
		require.Zero(t, declaredSize(Snappy, p[:cut]), "cut at %d", cut)
	}
	require.Zero(t, declaredSize(Gzip, []byte("short")))
}

// A payload that declares another size than it decodes to is corrupt,
// and the declared size never grows the buffer past the limit.
func TestALyingDeclaredSizeIsCorruption(t *testing.T) {
	data := bytes.Repeat([]byte("actorfeed "), 10_000)
	p := payloadOf(t, Gzip, data)
	for _, declared := range []uint32{1, uint32(len(data)) * 3, 1 << 31} {
		lying := append(bytes.Clone(p[:len(p)-4]), byte(declared), byte(declared>>8), byte(declared>>16), byte(declared>>24))
		c := newChunkReader(nil, 0, "lying", 1<<20)
		c.stored = lying
		_, err := c.decompress(Gzip)
		require.ErrorIs(t, err, format.ErrCorrupt, "declared %d", declared)
		require.LessOrEqual(t, cap(c.decoded), 1<<20)
	}
}
