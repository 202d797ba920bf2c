package recordio_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// gzipChunk is a chunk of one record whose gzip payload decompresses to
// size bytes (a length prefix, then zeros).
func gzipChunk(t *testing.T, size int) []byte {
	t.Helper()
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	require.NoError(t, err)
	require.NoError(t, binary.Write(zw, binary.LittleEndian, uint32(size-4)))
	zeros := make([]byte, 1<<16)
	for left := size - 4; left > 0; left -= len(zeros) {
		_, err := zw.Write(zeros[:min(left, len(zeros))])
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	hdr := binary.LittleEndian.AppendUint32(nil, recordio.Magic)
	hdr = binary.LittleEndian.AppendUint32(hdr, crc32.ChecksumIEEE(z.Bytes()))
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(recordio.Gzip))
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(z.Len()))
	hdr = binary.LittleEndian.AppendUint32(hdr, 1)
	return append(hdr, z.Bytes()...)
}

// allocated is the bytes fn allocates on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A gzip bomb (a small chunk that decompresses far beyond the limit) made a
// reader grow its buffer by doubling to twice the limit (1.07 GB for one 1 MB
// chunk, with the default 256 MiB limit). It is refused now having
// allocated next to nothing, and a chunk within the limit costs its own
// size, not a doubling buffer's.
func TestGzipBombAllocatesNothingBeyondTheLimit(t *testing.T) {
	const limit = 8 << 20
	bomb := gzipChunk(t, 8*limit)
	require.Less(t, len(bomb), limit/64, "a bomb: small stored, large decoded")
	var err error
	got := allocated(func() {
		s := recordio.NewScanner(bytes.NewReader(bomb), int64(len(bomb)), recordio.ScannerOptions{Name: "bomb", MaxDecodedBytes: limit})
		for s.Scan() {
		}
		err = s.Err()
	})
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "beyond the 8388608-byte limit")
	t.Logf("refusing the bomb allocated %d bytes", got)
	require.Less(t, got, uint64(limit/4), "nothing near the decoded size is allocated")

	fits := gzipChunk(t, limit-1024)
	var n int
	got = allocated(func() {
		s := recordio.NewScanner(bytes.NewReader(fits), int64(len(fits)), recordio.ScannerOptions{Name: "fits", MaxDecodedBytes: limit})
		for s.Scan() {
			n = len(s.Record())
		}
		err = s.Err()
	})
	require.NoError(t, err)
	require.Equal(t, limit-1024-4, n)
	t.Logf("reading a chunk of %d decoded bytes allocated %d bytes", limit-1024, got)
	require.Less(t, got, uint64(limit+limit/2), "the decoded chunk and little more")
}
