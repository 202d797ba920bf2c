package recordio_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// makeRecords returns n records of varied length, including empty ones.
func makeRecords(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([][]byte, n)
	for i := range out {
		r := make([]byte, rng.IntN(300))
		for j := range r {
			r[j] = byte(rng.IntN(8)) // compressible
		}
		if len(r) >= 4 {
			copy(r, fmt.Sprintf("%04d", i%10000))
		}
		out[i] = r
	}
	return out
}

func writeFile(t testing.TB, path string, records [][]byte, opts recordio.WriterOptions) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w, err := recordio.NewWriter(f, opts)
	require.NoError(t, err)
	for _, r := range records {
		require.NoError(t, w.Write(r))
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}

func openFile(t testing.TB, path string) (*os.File, int64) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	require.NoError(t, err)
	return f, st.Size()
}

func scanAll(t testing.TB, path string) ([][]byte, error) {
	t.Helper()
	f, size := openFile(t, path)
	s := recordio.NewScanner(f, size, recordio.ScannerOptions{Name: path})
	var out [][]byte
	for s.Scan() {
		out = append(out, bytes.Clone(s.Record()))
	}
	return out, s.Err()
}

func TestRoundTripEveryCompressor(t *testing.T) {
	records := makeRecords(10000, 7)
	for _, c := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy, recordio.Gzip} {
		t.Run(c.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "data.recordio")
			writeFile(t, path, records, recordio.WriterOptions{Compressor: c, MaxChunkBytes: 64 << 10})
			got, err := scanAll(t, path)
			require.NoError(t, err)
			require.Len(t, got, len(records))
			for i := range records {
				require.True(t, bytes.Equal(records[i], got[i]), "record %d differs", i)
			}
		})
	}
}

func TestChunkReadableAlone(t *testing.T) {
	records := makeRecords(10000, 8)
	path := filepath.Join(t.TempDir(), "data.recordio")
	writeFile(t, path, records, recordio.WriterOptions{Compressor: recordio.Snappy, MaxChunkBytes: 32 << 10})
	f, size := openFile(t, path)
	idx, err := recordio.LoadIndex(f, size, path)
	require.NoError(t, err)
	require.Greater(t, len(idx.Chunks), 10)
	assert.Equal(t, len(records), idx.NumRecords)

	k := len(idx.Chunks) / 2
	chunk := idx.Chunks[k]
	got, err := recordio.ReadChunk(f, size, path, chunk)
	require.NoError(t, err)
	require.Len(t, got, int(chunk.NumRecords))
	for i, r := range got {
		require.True(t, bytes.Equal(records[chunk.FirstRecord+i], r), "chunk %d record %d", k, i)
	}

	// A scanner started at chunk k reads from there to the end.
	s := recordio.NewScanner(f, size, recordio.ScannerOptions{Name: path, Start: chunk})
	n := 0
	for s.Scan() {
		require.True(t, bytes.Equal(records[chunk.FirstRecord+n], s.Record()))
		assert.Equal(t, chunk.FirstRecord+n, s.Position().Record)
		n++
	}
	require.NoError(t, s.Err())
	assert.Equal(t, len(records)-chunk.FirstRecord, n)

	c, within, ok := idx.Locate(chunk.FirstRecord + 3)
	require.True(t, ok)
	assert.Equal(t, chunk.Index, c.Index)
	assert.Equal(t, 3, within)
	_, _, ok = idx.Locate(len(records))
	assert.False(t, ok)
}

func TestResumeFromNext(t *testing.T) {
	records := makeRecords(500, 9)
	path := filepath.Join(t.TempDir(), "data.recordio")
	writeFile(t, path, records, recordio.WriterOptions{MaxChunkBytes: 4 << 10})
	f, size := openFile(t, path)
	s := recordio.NewScanner(f, size, recordio.ScannerOptions{})
	for range 123 {
		require.True(t, s.Scan())
	}
	start, skip := s.Next()
	r := recordio.NewScanner(f, size, recordio.ScannerOptions{Start: start})
	for range skip {
		require.True(t, r.Scan())
	}
	for i := 123; i < len(records); i++ {
		require.True(t, r.Scan())
		require.True(t, bytes.Equal(records[i], r.Record()), "record %d", i)
	}
	assert.False(t, r.Scan())
	require.NoError(t, r.Err())

	// Reset starts a new pass from the beginning with the same scanner.
	r.Reset(recordio.ChunkInfo{})
	for i := range records {
		require.True(t, r.Scan())
		require.True(t, bytes.Equal(records[i], r.Record()), "pass 2 record %d", i)
	}
	assert.False(t, r.Scan())
	require.NoError(t, r.Err())
}

func TestFlippedByteIsCorruption(t *testing.T) {
	records := makeRecords(40, 10)
	for _, c := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy, recordio.Gzip} {
		t.Run(c.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "good.recordio")
			writeFile(t, path, records, recordio.WriterOptions{Compressor: c, MaxChunkBytes: 1 << 10})
			good, err := os.ReadFile(path)
			require.NoError(t, err)
			f, size := openFile(t, path)
			idx, err := recordio.LoadIndex(f, size, path)
			require.NoError(t, err)
			require.Greater(t, len(idx.Chunks), 2)

			bad := filepath.Join(dir, "bad.recordio")
			// Flip every byte of the second chunk, one at a time.
			chunk := idx.Chunks[1]
			for off := chunk.Offset; off < chunk.End(); off++ {
				b := bytes.Clone(good)
				b[off] ^= 0x5a
				require.NoError(t, os.WriteFile(bad, b, 0o644))
				_, err := scanAll(t, bad)
				require.Error(t, err, "flip at %d went unnoticed", off)
				require.ErrorIs(t, err, format.ErrCorrupt, "flip at %d: %v", off, err)
				var fe *format.Error
				require.True(t, errors.As(err, &fe))
				assert.Equal(t, bad, fe.File)
				assert.Equal(t, chunk.Index, fe.Chunk, "flip at %d: %v", off, err)
				assert.Equal(t, chunk.Offset, fe.Offset)
				assert.Contains(t, err.Error(), fmt.Sprintf("chunk %d", chunk.Index))
				assert.Contains(t, err.Error(), fmt.Sprintf("offset %d", chunk.Offset))
				assert.Contains(t, err.Error(), bad)
			}
		})
	}
}

// A file cut anywhere, a chunk boundary included, is truncation: the
// begin marker announced a trailer that is missing. Without markers (as
// Paddle writes), a cut exactly between chunks is a shorter valid file.
func TestTruncationIsUnexpectedEOF(t *testing.T) {
	for _, noMarkers := range []bool{false, true} {
		records := makeRecords(40, 11)
		dir := t.TempDir()
		path := filepath.Join(dir, "good.recordio")
		writeFile(t, path, records, recordio.WriterOptions{MaxChunkBytes: 1 << 10, NoMarkers: noMarkers})
		good, err := os.ReadFile(path)
		require.NoError(t, err)
		f, size := openFile(t, path)
		idx, err := recordio.LoadIndex(f, size, path)
		require.NoError(t, err)
		require.Equal(t, map[bool]recordio.Completeness{false: recordio.Complete, true: recordio.Unmarked}[noMarkers], idx.Completeness)

		bad := filepath.Join(dir, "cut.recordio")
		ends := map[int64]bool{}
		for _, c := range idx.Chunks {
			ends[c.End()] = true
		}
		for cut := int64(1); cut < int64(len(good)); cut++ {
			require.NoError(t, os.WriteFile(bad, good[:cut], 0o644))
			got, err := scanAll(t, bad)
			if noMarkers && ends[cut] {
				require.NoError(t, err, "cut at %d", cut)
				continue
			}
			require.ErrorIs(t, err, io.ErrUnexpectedEOF, "cut at %d", cut)
			require.ErrorIs(t, err, format.ErrCorrupt)
			var fe *format.Error
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, bad, fe.File)
			assert.GreaterOrEqual(t, fe.Chunk, 0)
			assert.GreaterOrEqual(t, fe.Offset, int64(0))
			assert.LessOrEqual(t, len(got), len(records)) // a cut in the trailer leaves every record readable, and the file still unproven
			if !noMarkers && ends[cut] {
				assert.ErrorContains(t, err, "cut short")
				f, size := openFile(t, bad)
				x, err := recordio.LoadIndex(f, size, bad)
				require.NoError(t, err, "the index lists a cut file as far as it goes")
				assert.Equal(t, recordio.CutShort, x.Completeness)
			}
		}
	}
}

func TestBadMagic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.recordio")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte{0x42}, 64), 0o644))
	_, err := scanAll(t, path)
	require.ErrorIs(t, err, format.ErrCorrupt)
	assert.ErrorContains(t, err, "bad magic")
	assert.ErrorContains(t, err, "chunk 0, offset 0")
	f, size := openFile(t, path)
	x, err := recordio.LoadIndex(f, size, path)
	require.NoError(t, err)
	assert.ErrorIs(t, x.Err(), format.ErrCorrupt)
	assert.Equal(t, []recordio.Damage{{Offset: 0, Bytes: 64, Records: -1, Tail: true, Err: x.Err()}}, x.Damage, "the rest of the file: the next chunk's place is unknown")
}

func TestEmptyFileAndEmptyRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.recordio")
	writeFile(t, path, nil, recordio.WriterOptions{})
	got, err := scanAll(t, path)
	require.NoError(t, err)
	assert.Empty(t, got)

	writeFile(t, path, [][]byte{{}, {}, {1}}, recordio.WriterOptions{Compressor: recordio.Gzip})
	got, err = scanAll(t, path)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{{}, {}, {1}}, got)
}

// The header layout is the Go recordio library's: magic, checksum,
// compressor, stored size, record count.
func TestHeaderLayout(t *testing.T) {
	var buf bytes.Buffer
	w, err := recordio.NewWriter(&buf, recordio.WriterOptions{NoMarkers: true})
	require.NoError(t, err)
	require.NoError(t, w.Write([]byte("ab")))
	require.NoError(t, w.Close())
	assert.Equal(t, 1, w.Records())
	assert.Equal(t, 1, w.Chunks())
	b := buf.Bytes()
	require.Len(t, b, recordio.HeaderSize+4+2)
	assert.Equal(t, []byte{4, 3, 2, 1}, b[0:4])                            // magic
	assert.Equal(t, []byte{0, 0, 0, 0}, b[8:12])                           // compressor
	assert.Equal(t, []byte{6, 0, 0, 0}, b[12:16])                          // stored size
	assert.Equal(t, []byte{1, 0, 0, 0}, b[16:20])                          // records
	assert.Equal(t, []byte{2, 0, 0, 0, 'a', 'b'}, b[recordio.HeaderSize:]) // payload
	_, err = recordio.NewWriter(&buf, recordio.WriterOptions{Compressor: 7})
	assert.ErrorIs(t, err, recordio.ErrUnknownCompressor)
	assert.ErrorIs(t, w.Write([]byte("x")), recordio.ErrWriterClosed)
}

// fixChecksums rewrites the checksum of every chunk whose header and
// payload are whole, so that a mutation of a payload reaches decompression,
// record framing and the markers instead of stopping at the checksum.
func fixChecksums(b []byte) {
	for off := 0; off+recordio.HeaderSize <= len(b); {
		if binary.LittleEndian.Uint32(b[off:]) != recordio.Magic {
			return
		}
		end := off + recordio.HeaderSize + int(binary.LittleEndian.Uint32(b[off+12:]))
		if end > len(b) || end < off {
			return
		}
		binary.LittleEndian.PutUint32(b[off+4:], crc32.ChecksumIEEE(b[off+recordio.HeaderSize:end]))
		off = end
	}
}

// FuzzScanner reads arbitrary files, their checksums made right: every
// error is corruption with a position, never a panic, a hang or an
// allocation past the limit.
func FuzzScanner(f *testing.F) {
	for _, c := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy, recordio.Gzip} {
		var buf bytes.Buffer
		w, _ := recordio.NewWriter(&buf, recordio.WriterOptions{Compressor: c, MaxChunkBytes: 64})
		for _, r := range makeRecords(12, 3) {
			_ = w.Write(r)
		}
		_ = w.Close()
		f.Add(buf.Bytes())
	}
	f.Add([]byte{4, 3, 2, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.Clone(b)
		fixChecksums(b)
		const limit = 1 << 20
		s := recordio.NewScanner(bytes.NewReader(b), int64(len(b)), recordio.ScannerOptions{Name: "fuzz", MaxDecodedBytes: limit})
		total := 0
		for s.Scan() {
			total += len(s.Record())
		}
		if err := s.Err(); err != nil {
			var fe *format.Error
			if !errors.As(err, &fe) || fe.File != "fuzz" || fe.Chunk < 0 || fe.Offset < 0 || fe.Offset > int64(len(b)) {
				t.Fatalf("error without position: %v", err)
			}
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("damage not classed as corruption: %v", err)
			}
			checkSkipping(t, b) // a sound file reads the same in skip mode
		}
	})
}

// checkSkipping reads damaged b in skip mode: past every damage, each
// record read at its place in the index, and every record of the index
// read or reported lost.
func checkSkipping(t *testing.T, b []byte) {
	x, err := recordio.LoadIndex(bytes.NewReader(b), int64(len(b)), "fuzz")
	if err != nil {
		t.Fatalf("index: damage is listed, not returned: %v", err)
	}
	if read, lost := skipScan(t, b); len(read)+lost != x.NumRecords {
		t.Fatalf("skipping read %d records and lost %d; the index has %d", len(read), lost, x.NumRecords)
	}
}

// FuzzChunk fuzzes the layers under the checksum directly: a chunk of any
// compressor, record count and payload, its header and checksum made
// right, so every mutation reaches snappy, gzip, the record framing and
// the markers.
func FuzzChunk(f *testing.F) {
	for _, c := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy, recordio.Gzip} {
		var buf bytes.Buffer
		w, _ := recordio.NewWriter(&buf, recordio.WriterOptions{Compressor: c, NoMarkers: true})
		for _, r := range makeRecords(5, 3) {
			_ = w.Write(r)
		}
		_ = w.Close()
		f.Add(uint8(c), uint32(5), buf.Bytes()[recordio.HeaderSize:])
	}
	var marker bytes.Buffer
	w, _ := recordio.NewWriter(&marker, recordio.WriterOptions{})
	_ = w.Close()
	f.Add(uint8(0), uint32(0), marker.Bytes()[recordio.HeaderSize:recordio.HeaderSize+28])
	f.Fuzz(func(t *testing.T, comp uint8, n uint32, payload []byte) {
		b := binary.LittleEndian.AppendUint32(nil, recordio.Magic)
		b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(payload))
		b = binary.LittleEndian.AppendUint32(b, uint32(comp%4)) // 3 is unknown
		b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
		b = binary.LittleEndian.AppendUint32(b, n%1024)
		b = append(b, payload...)
		s := recordio.NewScanner(bytes.NewReader(b), int64(len(b)), recordio.ScannerOptions{Name: "fuzz", MaxDecodedBytes: 1 << 20})
		for s.Scan() {
			if len(s.Record()) > len(b)<<12+1<<20 {
				t.Fatalf("record of %d bytes from %d", len(s.Record()), len(b))
			}
		}
		if err := s.Err(); err != nil {
			var fe *format.Error
			if !errors.As(err, &fe) || fe.File != "fuzz" || fe.Chunk < 0 || fe.Chunk > 1 || fe.Offset < 0 || fe.Offset > int64(len(b)) {
				t.Fatalf("error without position: %v", err)
			}
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("damage not classed as corruption: %v", err)
			}
			checkSkipping(t, b) // a sound chunk reads the same in skip mode
		}
	})
}

// A released scanner's buffers go to the next scanner made, even after
// garbage collections. A pipeline in an order opens a reader for each run
// of chunks it is dealt, and allocates all the time: a sync.Pool, emptied
// by every collection, left most readers to allocate (and zero) a chunk's
// buffers afresh.
func TestReleasedBuffersOutliveCollections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.rio")
	writeFile(t, path, makeRecords(4000, 1), recordio.WriterOptions{})
	f, size := openFile(t, path)
	scan := func() {
		s := recordio.NewScanner(f, size, recordio.ScannerOptions{Name: path})
		for s.Scan() {
		}
		require.NoError(t, s.Err())
		s.Release()
	}
	scan()
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	scan()
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(size)/8, "a %d-byte file scanned in kept buffers", size)
}

// A reader dealt one chunk after another (Reset at each, as the order
// deals splits) reads each header and payload in one read into the same
// buffer: the buffer it read the last chunk into is kept whole. It lost
// the header's bytes of its capacity at every chunk, so every chunk after
// a Reset allocated and zeroed a buffer of its own.
func TestChunksDealtOneByOneReuseTheBuffer(t *testing.T) {
	for _, comp := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy} {
		path := filepath.Join(t.TempDir(), "f.rio")
		writeFile(t, path, makeRecords(4000, 1), recordio.WriterOptions{Compressor: comp, MaxChunkBytes: 64 << 10})
		f, size := openFile(t, path)
		x, err := recordio.LoadIndex(f, size, path)
		require.NoError(t, err)
		require.Greater(t, len(x.Chunks), 8)
		s := recordio.NewScanner(f, size, recordio.ScannerOptions{Name: path})
		pass := func() {
			for _, c := range x.Chunks {
				s.Reset(c)
				for range c.NumRecords {
					require.True(t, s.Scan())
				}
			}
		}
		pass()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		pass()
		runtime.ReadMemStats(&after)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "%v: %d chunks of 64 KiB", comp, len(x.Chunks))
		s.Release()
	}
}
