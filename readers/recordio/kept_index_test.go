package recordio_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// A kept index reads back as the index it was: every compressor, with and
// without markers; each record is found in the same chunk.
func TestAKeptIndexReadsBackAsBuilt(t *testing.T) {
	for _, c := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy, recordio.Gzip} {
		for _, noMarkers := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "part.recordio")
			writeFile(t, path, makeRecords(500, 7), recordio.WriterOptions{Compressor: c, MaxChunkBytes: 2048, NoMarkers: noMarkers})
			f, size := openFile(t, path)
			x, err := recordio.LoadIndex(f, size, path)
			require.NoError(t, err)
			require.Greater(t, len(x.Chunks), 5)
			b, err := x.MarshalBinary()
			require.NoError(t, err)
			got, err := recordio.UnmarshalIndex(b, size)
			require.NoError(t, err)
			require.Equal(t, x, got, "compressor %v, no markers %v", c, noMarkers)
			for _, rec := range []int{0, 1, 250, 499} {
				wc, wi, wok := x.Locate(rec)
				gc, gi, gok := got.Locate(rec)
				require.Equal(t, []any{wc, wi, wok}, []any{gc, gi, gok})
			}
		}
	}
}

// What does not fit is refused: an index with damage is not kept, and a
// kept one that is corrupt, or of a file of another size, is not read.
func TestAKeptIndexIsRefusedWhenItDoesNotFit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.recordio")
	writeFile(t, path, makeRecords(300, 3), recordio.WriterOptions{Compressor: recordio.Snappy, MaxChunkBytes: 1024})
	f, size := openFile(t, path)
	x, err := recordio.LoadIndex(f, size, path)
	require.NoError(t, err)
	b, err := x.MarshalBinary()
	require.NoError(t, err)

	flipped := bytes.Clone(b)
	flipped[len(flipped)/2] ^= 1
	_, err = recordio.UnmarshalIndex(flipped, size)
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "checksum")

	_, err = recordio.UnmarshalIndex(b, size/2)
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "not in a file")

	damaged := *x
	damaged.Damage = []recordio.Damage{{Chunk: 1, Err: errors.New("bad")}}
	_, err = damaged.MarshalBinary()
	require.ErrorIs(t, err, recordio.ErrDamagedIndex)
}

// resealIndex makes b's trailing CRC-32C right, so that mutations reach
// the checks behind it.
func resealIndex(b []byte) {
	if len(b) >= 4 {
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	}
}

// FuzzUnmarshalIndex: any bytes and size give an error of corruption or an
// index whose chunks lie in order inside the file and that encodes back
// to the same bytes; nothing panics or allocates past the input's size.
func FuzzUnmarshalIndex(f *testing.F) {
	for _, noMarkers := range []bool{false, true} {
		var buf bytes.Buffer
		w, _ := recordio.NewWriter(&buf, recordio.WriterOptions{Compressor: recordio.Snappy, MaxChunkBytes: 64, NoMarkers: noMarkers})
		for _, r := range makeRecords(12, 3) {
			_ = w.Write(r)
		}
		_ = w.Close()
		x, err := recordio.LoadIndex(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "seed")
		if err != nil {
			f.Fatal(err)
		}
		b, err := x.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int64(buf.Len()))
	}
	f.Add([]byte("RIOINDX1"), int64(100))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		b = bytes.Clone(b)
		resealIndex(b)
		x, err := recordio.UnmarshalIndex(b, size)
		if err != nil {
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("not classed as corruption: %v", err)
			}
			return
		}
		end, records := int64(0), 0
		for _, c := range x.Chunks {
			if c.Offset < end || c.End() > size || c.FirstRecord != records {
				t.Fatalf("chunk %+v after %d in a file of %d bytes", c, end, size)
			}
			end, records = c.End(), records+int(c.NumRecords)
		}
		again, err := x.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("encodes back to %x (%v), not %x", again, err, b)
		}
	})
}
