package readers_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/tensor"
)

// shardFiles writes n samples' fields (a jpg of i+10 bytes, a cls) into a
// directory and returns it.
func shardFiles(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		key := filepath.Join(dir, fmt.Sprintf("%06d", i))
		require.NoError(t, os.WriteFile(key+".jpg", []byte(strings.Repeat(string(rune('a'+i%26)), 10+i%50)), 0o644))
		require.NoError(t, os.WriteFile(key+".cls", []byte(fmt.Sprint(i%10)), 0o644))
	}
	return dir
}

// shardSamples opens a shard through the registry, seeks to sample from,
// and reads the rest.
func shardSamples(t *testing.T, path string, from int) (all []tensor.Slots, count uint64, counted bool) {
	t.Helper()
	r, err := readers.Open("wds:"+path, readers.OpenOptions{})
	require.NoError(t, err)
	defer r.Close()
	count, counted = countOf(r)
	require.NoError(t, r.(interface{ Seek(int) error }).Seek(from))
	for {
		s, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return all, count, counted
		}
		require.NoError(t, err)
		all = append(all, s)
	}
}

// Shards written by Python's tarfile as the webdataset library writes
// them, and by GNU tar, read back identically; from any sample, counted
// from their headers; a gzip'd one through its decoded copy.
func TestWebDatasetShardsFromTarfileAndGNUTar(t *testing.T) {
	t.Setenv(readers.DecodeCacheEnv, t.TempDir())
	src, dir := shardFiles(t, 2100), t.TempDir()
	py, gnu, gz := filepath.Join(dir, "py.tar"), filepath.Join(dir, "gnu.tar"), filepath.Join(dir, "py.tar.gz")
	testutil.PythonShard(t, src, py)
	testutil.GNUShard(t, src, gnu)
	testutil.PythonShard(t, src, gz)

	want, n, counted := shardSamples(t, py, 0)
	require.True(t, counted)
	require.EqualValues(t, 2100, n)
	require.Len(t, want, 2100)
	cls, err := tensor.View[int64](want[1234][0].Tensor)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, cls)
	require.Equal(t, strings.Repeat("m", 44), string(want[1234][1].Bytes()))
	for _, path := range []string{gnu, gz} {
		for _, from := range []int{0, 1024, 2099, 2100} {
			got, n, counted := shardSamples(t, path, from)
			require.True(t, counted, path)
			require.EqualValues(t, 2100, n, path)
			require.Len(t, got, 2100-from, "%s from %d", path, from)
			for i := range got {
				require.True(t, want[from+i].Equal(got[i]), "%s sample %d", path, from+i)
			}
		}
	}
}

// A shard opens through OpenOptions.Open (a data service worker's roots),
// once: its samples' offsets are read through the same file.
func TestWebDatasetShardOpensThroughTheOpener(t *testing.T) {
	src, dir := shardFiles(t, 30), t.TempDir()
	shard := filepath.Join(dir, "a.tar")
	testutil.GNUShard(t, src, shard)
	var opened []string
	open := func(path string, flag int) (*os.File, error) {
		opened = append(opened, path)
		return os.OpenFile(path, flag, 0)
	}
	r, err := readers.Open("wds:"+shard, readers.OpenOptions{Open: open})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.(interface{ Seek(int) error }).Seek(7))
	require.Equal(t, []string{shard}, opened)
}

// A shard damaged after its spans were read (in flight, or since): a
// header is not parsed again, so its damage loses nothing; a field's data
// that does not parse loses its sample alone under the skip policy, counted,
// and reading goes on at the next one.
func TestWebDatasetSkipsADamagedSample(t *testing.T) {
	src, dir := shardFiles(t, 40), t.TempDir()
	shard := filepath.Join(dir, "a.tar")
	testutil.GNUShard(t, src, shard)
	_, n, counted := shardSamples(t, shard, 0) // reads the spans, kept by the shard's identity
	require.True(t, counted)
	require.EqualValues(t, 40, n)
	st, err := os.Stat(shard)
	require.NoError(t, err)
	b, err := os.ReadFile(shard)
	require.NoError(t, err)
	at := bytes.Index(b, []byte("000020.cls"))
	require.Positive(t, at)
	b[at+148] ^= 0x55 // the header's checksum field
	require.NoError(t, os.WriteFile(shard, b, 0o644))
	require.NoError(t, os.Chtimes(shard, st.ModTime(), st.ModTime())) // the same identity: the spans hold

	read, skipped := readSkipping(t, "wds:"+shard, shard)
	require.Equal(t, 0, skipped, "the header is not read again")
	require.Equal(t, 40, read)

	b[at+512] = 'x' // the label's data: not a number
	require.NoError(t, os.WriteFile(shard, b, 0o644))
	require.NoError(t, os.Chtimes(shard, st.ModTime(), st.ModTime()))
	read, skipped = readSkipping(t, "wds:"+shard, shard)
	require.Equal(t, 1, skipped, "the damaged sample, counted")
	require.Equal(t, 39, read)
}

// A shard's spans are kept in the decode cache: the next process reads
// them back instead of the shard's headers (here, all damaged since), and
// does not trust a kept copy that fails its check.
func TestShardSpansOutliveTheProcess(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(readers.DecodeCacheEnv, cache)
	src, dir := shardFiles(t, 40), t.TempDir()
	shard := filepath.Join(dir, "a.tar")
	testutil.GNUShard(t, src, shard)
	want, n, _ := shardSamples(t, shard, 0)
	require.EqualValues(t, 40, n)
	kept, err := filepath.Glob(filepath.Join(cache, "*.wds-index"))
	require.NoError(t, err)
	require.Len(t, kept, 1)

	st, err := os.Stat(shard)
	require.NoError(t, err)
	b, err := os.ReadFile(shard)
	require.NoError(t, err)
	for i := range 40 {
		for _, ext := range []string{".cls", ".jpg"} {
			at := bytes.Index(b, []byte(fmt.Sprintf("%06d%s", i, ext)))
			require.GreaterOrEqual(t, at, 0)
			b[at+148] ^= 0x55 // the header's checksum field
		}
	}
	require.NoError(t, os.WriteFile(shard, b, 0o644))
	require.NoError(t, os.Chtimes(shard, st.ModTime(), st.ModTime())) // the same identity
	readers.ForgetIndexes()
	got, n, _ := shardSamples(t, shard, 7)
	require.EqualValues(t, 40, n)
	require.Len(t, got, 33)
	for i := range got {
		require.True(t, want[7+i].Equal(got[i]), "sample %d", 7+i)
	}

	k, err := os.ReadFile(kept[0])
	require.NoError(t, err)
	k[len(k)/2] ^= 1
	require.NoError(t, os.WriteFile(kept[0], k, 0o644))
	readers.ForgetIndexes()
	r, err := readers.Open("wds:"+shard, readers.OpenOptions{})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Next(context.Background())
	require.ErrorIs(t, err, format.ErrFraming, "the kept spans fail their check: the damaged headers are scanned")
	n, _ = countOf(r)
	require.Zero(t, n, "no sample lies before the damage")
}

// tfrecordFile writes n Examples (jpg: i%50+10 bytes, cls: i%10) with
// tfrecord's writer, gzip'd when path ends in .gz.
func tfrecordFile(t *testing.T, path string, n int) {
	t.Helper()
	var b bytes.Buffer
	w := tfrecord.NewWriter(&b)
	for i := range n {
		var x tfrecord.Example
		x.Bytes("jpg", []byte(strings.Repeat(string(rune('a'+i%26)), 10+i%50)))
		x.Int64("cls", int64(i%10))
		require.NoError(t, w.Write(x.Marshal()))
	}
	data := b.Bytes()
	if strings.HasSuffix(path, ".gz") {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, err := zw.Write(data)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		data = z.Bytes()
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// A TFRecord file reads by the entry's spec or by one inferred, from any
// record, counted from its headers; a gzip'd one through its decoded copy.
func TestTFRecordFilesBySpecFromAnyRecord(t *testing.T) {
	t.Setenv(readers.DecodeCacheEnv, t.TempDir())
	dir := t.TempDir()
	raw, gz := filepath.Join(dir, "a.tfrecord"), filepath.Join(dir, "a.tfrecord.gz")
	tfrecordFile(t, raw, 1500)
	tfrecordFile(t, gz, 1500)
	want := entrySamples(t, raw, 0, 1500)
	require.Len(t, want, 1500)
	require.Equal(t, strings.Repeat("a", 32), string(want[1222][1].Bytes()), "inferred: cls, jpg")
	for _, entry := range []string{"tfrecord(jpg=bytes,cls=int64):" + raw, gz} {
		for _, from := range []int{0, 1024, 1499, 1500} {
			got := entrySamples(t, entry, from, 1500)
			require.Len(t, got, 1500-from, "%s from %d", entry, from)
			for i := range got {
				x := want[from+i]
				if strings.HasPrefix(entry, "tfrecord(") { // the spec's order: jpg, cls
					x = tensor.Slots{x[1], x[0]}
				}
				require.True(t, x.Equal(got[i]), "%s sample %d", entry, from+i)
			}
		}
	}
	r, err := readers.Open("tfrecord(jpg=bytes,cls=int64):"+raw, readers.OpenOptions{})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, []string{"jpg", "cls"}, r.(interface{ SlotNames() []string }).SlotNames())
}

// entrySamples opens entry, checks it counts n samples from its headers,
// seeks to sample from and reads the rest.
func entrySamples(t *testing.T, entry string, from int, n uint64) (all []tensor.Slots) {
	t.Helper()
	r, err := readers.Open(entry, readers.OpenOptions{})
	require.NoError(t, err)
	defer r.Close()
	count, counted := countOf(r)
	require.True(t, counted, entry)
	require.Equal(t, n, count, entry)
	require.NoError(t, r.(interface{ Seek(int) error }).Seek(from))
	for {
		s, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return all
		}
		require.NoError(t, err)
		all = append(all, s)
	}
}

// A record whose data is damaged is skipped and counted; one whose length
// is damaged after indexing is skipped by the offsets.
func TestTFRecordSkipsDamagedRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.tfrecord")
	tfrecordFile(t, path, 40)
	_ = entrySamples(t, path, 0, 40) // reads the offsets, kept by the file's identity
	st, err := os.Stat(path)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	at := bytes.Index(b, []byte(strings.Repeat("k", 20)))
	require.Positive(t, at)
	b[at] ^= 1 // record 10's data
	offsets, err := tfrecord.NewReader(bytes.NewReader(b), path).Offsets()
	require.NoError(t, err)
	b[offsets[20]] ^= 1 // record 20's length
	require.NoError(t, os.WriteFile(path, b, 0o644))
	require.NoError(t, os.Chtimes(path, st.ModTime(), st.ModTime()))

	read, skipped := readSkipping(t, path, path+": record ")
	require.Equal(t, 2, skipped)
	require.Equal(t, 38, read)
}

// bytesSource is a Source over b, counting its opens.
type bytesSource struct {
	*io.SectionReader
}

func (bytesSource) Close() error { return nil }

// OpenStream reads a stream file's bytes from its source, opened again at
// every Reset, and seeks in them as in a file.
func TestOpenStreamReadsItsSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.tfrecord")
	tfrecordFile(t, path, 30)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	opens := 0
	r, err := readers.OpenStream("tfrecord(cls=int64):"+path, func() (readers.Source, error) {
		opens++
		return bytesSource{io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data)))}, nil
	})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.(interface{ Seek(int) error }).Seek(27))
	for _, want := range []int64{7, 8, 9} {
		s, err := r.Next(context.Background())
		require.NoError(t, err)
		v, err := tensor.View[int64](s[0].Tensor)
		require.NoError(t, err)
		require.Equal(t, []int64{want}, v)
	}
	_, err = r.Next(context.Background())
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, r.Reset())
	require.Equal(t, 2, opens)
	_, err = readers.OpenStream("x.recordio", nil)
	require.ErrorIs(t, err, readers.ErrUnknownFormat)
}

// countOf is a file reader's Count as (n, counted): false when it says
// ErrUncounted.
func countOf(r readers.Reader) (uint64, bool) {
	n, err := r.(interface{ Count() (uint64, error) }).Count()
	return n, err == nil
}

// readSkipping reads entry to its end as the skip policy does: each
// damage, an error naming what, passed over with SkipCorrupt.
func readSkipping(t *testing.T, entry, names string) (read, skipped int) {
	t.Helper()
	r, err := readers.Open(entry, readers.OpenOptions{})
	require.NoError(t, err)
	defer r.Close()
	skip := r.(interface{ SkipCorrupt() (int, bool) })
	for {
		_, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return read, skipped
		}
		if err != nil {
			require.ErrorIs(t, err, format.ErrCorrupt)
			require.ErrorContains(t, err, names)
			n, ok := skip.SkipCorrupt()
			require.True(t, ok)
			skipped += n
			continue
		}
		read++
	}
}

// Shards holding sparse members (readers/wds/testdata/sparse, written by
// GNU tar -S in each of its formats) read through the registry as
// Python's tarfile reads them, from any sample: with their spans scanned,
// then kept in the decode cache and read back; gzip'd, through the decoded
// copy; and with the cache off. Before, the second sample read raw header
// bytes and the third the fourth's, with no error (issue 59).
func TestWebDatasetSparseMembersThroughTheRegistry(t *testing.T) {
	paths, err := filepath.Glob("wds/testdata/sparse/*.tar")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	want := []string{"hello1", string(make([]byte, 8192)) + "second sample data", "third"}
	for _, cache := range []string{t.TempDir(), "off"} {
		t.Setenv(readers.DecodeCacheEnv, cache)
		for _, path := range paths {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			gz := filepath.Join(t.TempDir(), filepath.Base(path)+".gz")
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, err = zw.Write(b)
			require.NoError(t, err)
			require.NoError(t, zw.Close())
			require.NoError(t, os.WriteFile(gz, z.Bytes(), 0o644))
			for _, p := range []string{path, path, gz} { // the second read finds the kept spans
				for from := range want {
					got, _, _ := shardSamples(t, p, from)
					require.Len(t, got, len(want)-from, "%s from %d (cache %s)", p, from, cache)
					for i, s := range got {
						require.Equal(t, want[from+i], string(s[1].Bytes()), "%s sample %d (cache %s)", p, from+i, cache)
					}
				}
			}
		}
	}
}

// A raw TFRecord file whose sixth record's length fails its checksum is
// counted up to it (DamagedTail says so, and where), reads its five
// records, from any of them, and then fails with the damage to its
// framing, gzip'd or not: the records after it cannot be found. Before,
// the file could not be counted at all, and skipping it was advised.
func TestTFRecordDamagedFramingEndsTheFileThere(t *testing.T) {
	t.Setenv(readers.DecodeCacheEnv, t.TempDir())
	dir := t.TempDir()
	raw := filepath.Join(dir, "a.tfrecord")
	tfrecordFile(t, raw, 10)
	b, err := os.ReadFile(raw)
	require.NoError(t, err)
	at := 0
	for range 5 {
		at += 16 + int(binary.LittleEndian.Uint64(b[at:]))
	}
	b[at+9] ^= 0xff // the sixth record's length checksum
	require.NoError(t, os.WriteFile(raw, b, 0o644))
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err = zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(raw+".gz", z.Bytes(), 0o644))
	for _, path := range []string{raw, raw + ".gz"} {
		r, err := readers.Open("tfrecord:"+path, readers.OpenOptions{})
		require.NoError(t, err)
		_, err = r.(interface{ Count() (uint64, error) }).Count()
		tail, ok := errors.AsType[*readers.DamagedTail](err)
		require.True(t, ok, "%s: %v", path, err)
		require.EqualValues(t, 5, tail.Samples)
		require.ErrorIs(t, err, format.ErrFraming)
		fe, ok := errors.AsType[*format.Error](err)
		require.True(t, ok)
		require.EqualValues(t, at, fe.Offset)
		for _, from := range []int{0, 3} {
			require.NoError(t, r.(interface{ Seek(int) error }).Seek(from))
			n := 0
			for {
				_, err := r.Next(context.Background())
				if err != nil {
					require.ErrorIs(t, err, format.ErrFraming, path)
					break
				}
				n++
			}
			require.Equal(t, 5-from, n, "%s from %d", path, from)
		}
		require.NoError(t, r.Close())
	}
}
