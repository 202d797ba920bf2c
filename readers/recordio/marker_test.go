package recordio_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// A written file starts with a begin marker and ends with a trailer, each a
// chunk of zero records that Paddle's reader skips (it reads the declared
// records of a chunk and ignores the rest of its payload).
func TestMarkersFrameAWrittenFile(t *testing.T) {
	var buf bytes.Buffer
	w, err := recordio.NewWriter(&buf, recordio.WriterOptions{})
	require.NoError(t, err)
	require.NoError(t, w.Write([]byte("ab")))
	require.NoError(t, w.Close())
	b := buf.Bytes()
	const marker = recordio.HeaderSize + 28
	require.Len(t, b, marker+recordio.HeaderSize+4+2+marker)
	for _, m := range [][]byte{b[:marker], b[len(b)-marker:]} {
		assert.Equal(t, []byte{0, 0, 0, 0}, m[8:12], "no compression")
		assert.Equal(t, []byte{28, 0, 0, 0}, m[12:16], "a 28-byte payload")
		assert.Equal(t, []byte{0, 0, 0, 0}, m[16:20], "zero records")
		assert.Equal(t, "AFMARKER", string(m[20:28]))
	}
	trailer := b[len(b)-28:]
	assert.EqualValues(t, 2, binary.LittleEndian.Uint32(trailer[8:]), "kind: end")
	assert.EqualValues(t, 1, binary.LittleEndian.Uint64(trailer[12:]), "data chunks")
	assert.EqualValues(t, 1, binary.LittleEndian.Uint64(trailer[20:]), "records")
}

// Two whole files concatenated are whole; a data chunk removed from the
// middle of one is caught by its trailer's counts.
func TestTrailerCountsTheChunks(t *testing.T) {
	dir := t.TempDir()
	records := makeRecords(60, 12)
	path := filepath.Join(dir, "a.recordio")
	writeFile(t, path, records, recordio.WriterOptions{MaxChunkBytes: 1 << 10})
	one, err := os.ReadFile(path)
	require.NoError(t, err)

	both := filepath.Join(dir, "both.recordio")
	require.NoError(t, os.WriteFile(both, append(bytes.Clone(one), one...), 0o644))
	got, err := scanAll(t, both)
	require.NoError(t, err)
	require.Len(t, got, 2*len(records))
	f, size := openFile(t, both)
	x, err := recordio.LoadIndex(f, size, both)
	require.NoError(t, err)
	assert.Equal(t, recordio.Complete, x.Completeness)
	assert.Equal(t, 2*len(records), x.NumRecords)

	f, size = openFile(t, path)
	x, err = recordio.LoadIndex(f, size, path)
	require.NoError(t, err)
	require.Greater(t, len(x.Chunks), 2)
	gone := x.Chunks[1]
	holed := filepath.Join(dir, "holed.recordio")
	require.NoError(t, os.WriteFile(holed, append(bytes.Clone(one[:gone.Offset]), one[gone.End():]...), 0o644))
	_, err = scanAll(t, holed)
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "the trailer counts")
	f, size = openFile(t, holed)
	x, err = recordio.LoadIndex(f, size, holed)
	require.NoError(t, err, "damage is listed, not a failure to read")
	require.ErrorIs(t, x.Err(), format.ErrCorrupt)
	require.ErrorContains(t, x.Err(), "the trailer counts")
}
