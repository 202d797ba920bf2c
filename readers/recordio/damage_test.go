package recordio_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// skipScan reads b as a reader under the skip policy does: past every
// damage SkipChunk gets over. It returns the records read and those
// SkipChunk reported lost, checking that each record read is at the
// file-wide place the index gives it.
func skipScan(t testing.TB, b []byte) (read [][]byte, lost int) {
	t.Helper()
	s := recordio.NewScanner(bytes.NewReader(b), int64(len(b)), recordio.ScannerOptions{Name: "f", MaxDecodedBytes: 1 << 20})
	for skips := 0; ; skips++ {
		for s.Scan() {
			if got := s.Position().Record; got != len(read)+lost {
				t.Fatalf("record %d read as record %d", len(read)+lost, got)
			}
			read = append(read, bytes.Clone(s.Record()))
		}
		if s.Err() == nil {
			return read, lost
		}
		if skips > len(b)/recordio.HeaderSize+1 {
			t.Fatalf("more skips than chunks fit in %d bytes", len(b))
		}
		n, ok := s.SkipChunk()
		if !ok {
			t.Fatalf("damage the scanner cannot get past: %v", s.Err())
		}
		lost += n
	}
}

// damagedChunk is a chunk of compressor c whose header declares records
// that its stored bytes cannot hold; its checksum is right.
func damagedChunk(c recordio.Compressor, records uint32) []byte {
	payload := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	b := binary.LittleEndian.AppendUint32(nil, recordio.Magic)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(payload))
	b = binary.LittleEndian.AppendUint32(b, uint32(c))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, records)
	return append(b, payload...)
}

// A header that declares 4,294,967,295 records in 8 stored bytes sized
// the order of a reader that skipped corrupt chunks (3.6 GB and more, to
// out-of-memory). The count is checked against what the bytes can hold
// before it sizes anything: the chunk is damage in its place, listed by
// the index with no records, and a skipping reader goes on after it.
func TestCountBeyondItsBytesIsDamageInPlace(t *testing.T) {
	for _, c := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy, recordio.Gzip} {
		t.Run(c.String(), func(t *testing.T) {
			records := makeRecords(30, 5)
			good := written(t, records, recordio.WriterOptions{Compressor: c, MaxChunkBytes: 1 << 10, NoMarkers: true})
			x, err := recordio.LoadIndex(bytes.NewReader(good.Bytes()), int64(good.Len()), "f")
			require.NoError(t, err)
			require.Greater(t, len(x.Chunks), 2)
			at := x.Chunks[1].Offset
			bad := append(append(bytes.Clone(good.Bytes()[:at]), damagedChunk(c, 1<<32-1)...), good.Bytes()[at:]...)

			x, err = recordio.LoadIndex(bytes.NewReader(bad), int64(len(bad)), "f")
			require.NoError(t, err)
			require.ErrorIs(t, x.Err(), format.ErrCorrupt)
			require.ErrorContains(t, x.Err(), "header declares 4294967295 records")
			assert.Equal(t, len(records), x.NumRecords, "the damaged chunk holds no record of the index")
			require.Len(t, x.Damage, 1)
			assert.Equal(t, recordio.Damage{Chunk: 1, Offset: at, Bytes: 28, Records: -1, Err: x.Err()}, x.Damage[0])

			got, lost := skipScan(t, bad)
			assert.Equal(t, records, normalize(got))
			assert.Zero(t, lost)
		})
	}
}

// normalize makes empty records nil, as makeRecords's are not.
func normalize(rs [][]byte) [][]byte {
	for i, r := range rs {
		if len(r) == 0 {
			rs[i] = []byte{}
		}
	}
	return rs
}

// A file cut in its last chunk is read whole up to the cut under the skip
// policy; the cut chunk is the file's damaged tail, its declared records
// listed as what it held.
func TestCutTailIsSkipped(t *testing.T) {
	records := makeRecords(40, 6)
	buf := written(t, records, recordio.WriterOptions{MaxChunkBytes: 1 << 10})
	whole, err := recordio.LoadIndex(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "f")
	require.NoError(t, err)
	last := whole.Chunks[len(whole.Chunks)-1]
	cut := buf.Bytes()[:last.Offset+30]

	x, err := recordio.LoadIndex(bytes.NewReader(cut), int64(len(cut)), "f")
	require.NoError(t, err)
	require.ErrorIs(t, x.Err(), format.ErrCorrupt)
	assert.Equal(t, len(whole.Chunks)-1, len(x.Chunks))
	require.Len(t, x.Damage, 1)
	d := x.Damage[0]
	assert.Equal(t, recordio.Damage{Chunk: last.Index, Offset: last.Offset, Bytes: 30, Records: int(last.NumRecords), Tail: true, Err: d.Err}, d)
	assert.Equal(t, recordio.CutShort, x.Completeness)

	got, lost := skipScan(t, cut)
	assert.Equal(t, records[:last.FirstRecord], normalize(got))
	assert.Zero(t, lost, "the cut chunk's records have no place in the index")
}

// A payload that fails its checksum loses its chunk's records, which the
// index counts: a skipping reader reports them lost and goes on.
func TestFlippedPayloadLosesItsChunk(t *testing.T) {
	records := makeRecords(40, 7)
	buf := written(t, records, recordio.WriterOptions{MaxChunkBytes: 1 << 10})
	b := bytes.Clone(buf.Bytes())
	x, err := recordio.LoadIndex(bytes.NewReader(b), int64(len(b)), "f")
	require.NoError(t, err)
	c := x.Chunks[1]
	b[c.Offset+recordio.HeaderSize+3] ^= 0xff

	got, lost := skipScan(t, b)
	assert.Equal(t, int(c.NumRecords), lost)
	want := append(append([][]byte(nil), records[:c.FirstRecord]...), records[c.FirstRecord+int(c.NumRecords):]...)
	assert.Equal(t, want, normalize(got))
}

// written is records written with opts.
func written(t *testing.T, records [][]byte, opts recordio.WriterOptions) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	w, err := recordio.NewWriter(&buf, opts)
	require.NoError(t, err)
	for _, r := range records {
		require.NoError(t, w.Write(r))
	}
	require.NoError(t, w.Close())
	return &buf
}
