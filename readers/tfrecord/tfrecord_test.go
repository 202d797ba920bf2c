package tfrecord_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sample is record i's features.
func sample(i int) (image []byte, label int64, pair []float32, tokens []int64) {
	for j := range 10 + i {
		image = append(image, byte((i*7+j)%256))
	}
	for k := range i % 4 {
		tokens = append(tokens, int64(k))
	}
	return image, int64(i*3 - 5), []float32{float32(i) * 0.5, -float32(i)}, tokens
}

const spec = "image/encoded=bytes,label=int64,pair=float[2],tokens=int64[]"

// file writes n samples with the package's own writer.
func file(t testing.TB, n int) []byte {
	var b bytes.Buffer
	w := tfrecord.NewWriter(&b)
	for i := range n {
		image, label, pair, tokens := sample(i)
		var x tfrecord.Example
		x.Bytes("image/encoded", image)
		x.Int64("label", label)
		x.Float("pair", pair...)
		x.Int64("tokens", tokens...)
		require.NoError(t, w.Write(x.Marshal()))
	}
	return b.Bytes()
}

func examples(t testing.TB, data []byte, s string) *tfrecord.Examples {
	var sp tfrecord.Spec
	if s != "" {
		var err error
		sp, err = tfrecord.ParseSpec(s)
		require.NoError(t, err)
	}
	return tfrecord.NewExamples(tfrecord.NewReader(bytes.NewReader(data), "t.tfrecord"), sp)
}

// checkSample checks record i's slots, read by spec.
func checkSample(t *testing.T, i int, s tensor.Slots) {
	t.Helper()
	image, label, pair, tokens := sample(i)
	require.Len(t, s, 4)
	require.Equal(t, image, s[0].Bytes())
	require.Equal(t, tensor.LoD{{0, len(image)}}, s[0].LoD)
	require.Equal(t, tensor.Shape{1}, s[1].Shape())
	require.Equal(t, label, int64(binary.LittleEndian.Uint64(s[1].Bytes())))
	require.Equal(t, tensor.Shape{1, 2}, s[2].Shape())
	require.Equal(t, pair[1], math.Float32frombits(binary.LittleEndian.Uint32(s[2].Bytes()[4:])))
	require.Equal(t, tensor.Shape{len(tokens)}, s[3].Shape())
	require.Equal(t, tensor.LoD{{0, len(tokens)}}, s[3].LoD)
}

func TestExamplesAreReadBySpec(t *testing.T) {
	e := examples(t, file(t, 5), spec)
	for i := range 5 {
		s, err := e.Next()
		require.NoError(t, err)
		checkSample(t, i, s)
	}
	_, err := e.Next()
	require.ErrorIs(t, err, io.EOF)
}

func TestTheSpecIsInferredFromTheFirstRecord(t *testing.T) {
	e := examples(t, file(t, 3), "")
	_, err := e.Next()
	require.NoError(t, err)
	// Record 0's tokens are empty: not one value, so any number.
	require.Equal(t, "image/encoded=bytes,label=int64,pair=float[],tokens=int64[]", e.Spec().String())
}

func TestAFixedFeatureOfAnotherSizeIsDamage(t *testing.T) {
	e := examples(t, file(t, 3), "image/encoded=bytes,tokens=int64[1]")
	_, err := e.Next() // record 0 has no tokens
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "t.tfrecord: record 0, offset 0: ")
	require.ErrorContains(t, err, "feature tokens holds 0 values, the spec (tokens=int64[1]) wants 1")
	s, err := e.Next() // the reader stands at the next record
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{1, 1}, s[1].Shape())
}

func TestAMissingOrMistypedFeatureIsDamage(t *testing.T) {
	_, err := examples(t, file(t, 1), "nope=int64").Next()
	require.ErrorContains(t, err, "the record has no feature nope")
	_, err = examples(t, file(t, 1), "label=float").Next()
	require.ErrorContains(t, err, "feature label holds a int64 list, the spec says float")
	s, err := examples(t, file(t, 1), "nope=float[]").Next()
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{0}, s[0].Shape())
}

// TestWireFormsProtobufAllows reads unpacked lists, a oneof given twice and
// a map key given twice, as protobuf's own parser reads them.
func TestWireFormsProtobufAllows(t *testing.T) {
	list := protowire.AppendTag(nil, 1, protowire.VarintType)
	list = protowire.AppendVarint(list, 7)
	list = protowire.AppendTag(list, 1, protowire.VarintType)
	list = protowire.AppendVarint(list, uint64(math.MaxUint64)) // -1
	unpacked := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), list)
	var first tfrecord.Example
	first.Float("x", 1.5) // replaced by the entry below, as a map's later key
	var second tfrecord.Example
	second.Bytes("y", []byte("bytes first, then ints: the oneof's last kind wins"))
	msg := append(first.Marshal(), second.Marshal()...)
	features := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("x"))
	features = protowire.AppendBytes(protowire.AppendTag(features, 2, protowire.BytesType), unpacked)
	entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), features)
	msg = protowire.AppendBytes(protowire.AppendTag(msg, 1, protowire.BytesType), entry)

	p := tfrecord.NewParser(tfrecord.Spec{{Name: "x", Kind: tfrecord.Int64, Shape: []int{2}}})
	s, err := p.Parse(msg)
	require.NoError(t, err)
	require.Equal(t, []byte{7, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, s[0].Bytes())
}

func TestADamagedRecordIsSkippedAndTheRestRead(t *testing.T) {
	data := file(t, 3)
	data[12+3] ^= 1 // record 0's data
	e := examples(t, data, spec)
	_, err := e.Next()
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "t.tfrecord: record 0, offset 0: ")
	require.ErrorContains(t, err, "data checksum")
	require.False(t, e.Broken())
	s, err := e.Next()
	require.NoError(t, err)
	checkSample(t, 1, s)
}

func TestADamagedLengthBreaksTheFile(t *testing.T) {
	data := file(t, 3)
	second := recordEnd(data, 0)
	data[second] ^= 1
	e := examples(t, data, spec)
	_, err := e.Next()
	require.NoError(t, err)
	_, err = e.Next()
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorContains(t, err, "record 1, offset ")
	require.ErrorContains(t, err, "length checksum")
	require.True(t, e.Broken())
	_, again := e.Next()
	require.Equal(t, err, again)
}

func TestALengthPastTheLimitOrTheFileIsAnError(t *testing.T) {
	var huge [12]byte
	binary.LittleEndian.PutUint64(huge[:], tfrecord.MaxRecordBytes+1)
	binary.LittleEndian.PutUint32(huge[8:], maskedCRC(huge[:8]))
	_, err := tfrecord.NewReader(bytes.NewReader(huge[:]), "h").Next()
	require.ErrorContains(t, err, "more than one may hold")

	var big [12]byte // within the limit, and not there: no 200 MiB read
	binary.LittleEndian.PutUint64(big[:], 200<<20)
	binary.LittleEndian.PutUint32(big[8:], maskedCRC(big[:8]))
	_, err = tfrecord.NewReader(bytes.NewReader(append(big[:], 1, 2, 3)), "h").Next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.ErrorIs(t, err, format.ErrCorrupt)

	_, err = tfrecord.NewReader(bytes.NewReader(file(t, 1)[:7]), "h").Next()
	require.ErrorContains(t, err, "a record header of 7 bytes, want 12")
}

func TestOffsetsAndSeek(t *testing.T) {
	data := file(t, 6)
	offsets, err := tfrecord.NewReader(bytes.NewReader(data), "t").Offsets()
	require.NoError(t, err)
	require.Len(t, offsets, 6)
	require.Equal(t, int64(recordEnd(data, 0)), offsets[1])
	e := examples(t, data, spec)
	for _, i := range []int{4, 1, 5, 0} {
		require.NoError(t, e.Seek(i, offsets[i]))
		s, err := e.Next()
		require.NoError(t, err)
		checkSample(t, i, s)
		require.Equal(t, i+1, e.Index())
	}
	require.NoError(t, e.Seek(6, int64(len(data))))
	_, err = e.Next()
	require.ErrorIs(t, err, io.EOF)
}

func TestSpecs(t *testing.T) {
	s, err := tfrecord.ParseSpec(" a/b=bytes, c=float[2, 3], d=int64[] ")
	require.NoError(t, err)
	require.Equal(t, "a/b=bytes,c=float[2,3],d=int64[]", s.String())
	require.Equal(t, []string{"a/b", "c", "d"}, s.Names())
	for bad, msg := range map[string]string{
		"":                     "an empty spec",
		"a":                    "want name=kind",
		"a=text":               `kind "text"`,
		"a=int64,a=float":      "names feature a twice",
		"a=bytes[2]":           "a bytes feature holds one value",
		"a=float[0]":           "want sizes from 1",
		"a=float[65536,65536]": "at most",
		"a=float[2":            "unbalanced brackets",
		"a(b=int64":            "want name=kind",
	} {
		_, err := tfrecord.ParseSpec(bad)
		require.ErrorContains(t, err, msg, bad)
	}
}

// features is sample i's as the oracle reads and writes them.
func features(i int) map[string]oracle.Feature {
	image, label, pair, tokens := sample(i)
	bits := make([]uint32, len(pair))
	for j, v := range pair {
		bits[j] = math.Float32bits(v)
	}
	return map[string]oracle.Feature{
		"image/encoded": {Kind: "bytes", Bytes: [][]byte{image}},
		"label":         {Kind: "int64", Ints: []int64{label}},
		"pair":          {Kind: "float", Floats: bits},
		"tokens":        {Kind: "int64", Ints: append([]int64{}, tokens...)},
	}
}

// TestAnIndependentWriterAndReader reads records that Python's protobuf
// and crc32c wrote, gzip'd too, and has them read what this package wrote.
func TestAnIndependentWriterAndReader(t *testing.T) {
	o := oracle.Start(t)
	var want []map[string]oracle.Feature
	for i := range 6 {
		want = append(want, features(i))
	}
	raw, err := o.WriteTFRecord(want)
	require.NoError(t, err)
	e := examples(t, raw, spec)
	for i := range 6 {
		s, err := e.Next()
		require.NoError(t, err, "record %d", i)
		checkSample(t, i, s)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	r, err := tfrecord.NewGzipReader(&z, "py.tfrecord.gz")
	require.NoError(t, err)
	n, err := r.Offsets()
	require.NoError(t, err)
	require.Len(t, n, 6)

	got, err := o.TFRecord(file(t, 6))
	require.NoError(t, err)
	require.Len(t, got, 6)
	for i, r := range got {
		require.Empty(t, r.Err)
		require.Equal(t, want[i], r.Features, "record %d", i)
	}
}

// recordEnd is where record i ends in data.
func recordEnd(data []byte, i int) int {
	at := 0
	for range i + 1 {
		at += 16 + int(binary.LittleEndian.Uint64(data[at:]))
	}
	return at
}

func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

// A read that fails is not damage: the error is the read's, so that the
// file reader retries rather than skipping, raw or gzip'd.
func TestAFailedReadIsNotDamage(t *testing.T) {
	eio := &os.PathError{Op: "read", Path: "t", Err: syscall.EIO}
	data := file(t, 3)
	for _, cut := range []int{5, 20, recordEnd(data, 0) + 3} {
		r := tfrecord.NewReader(&testutil.FailingReader{Data: data[:cut], Err: eio}, "t")
		var err error
		for err == nil {
			_, err = r.Next()
		}
		require.ErrorIs(t, err, syscall.EIO, "cut at %d", cut)
		require.NotErrorIs(t, err, format.ErrCorrupt, "cut at %d", cut)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	for _, cut := range []int{5, z.Len() / 2} {
		r, err := tfrecord.NewGzipReader(&testutil.FailingReader{Data: z.Bytes()[:cut], Err: eio}, "t.gz")
		for err == nil {
			_, err = r.Next()
		}
		require.ErrorIs(t, err, syscall.EIO, "gzip cut at %d", cut)
		require.NotErrorIs(t, err, format.ErrCorrupt, "gzip cut at %d", cut)
	}
}

// Examples of every kind and size parsed as views, one after another over
// the same storage, are what Parse makes of each.
func TestParseViewsIsParse(t *testing.T) {
	sp, err := tfrecord.ParseSpec(spec)
	require.NoError(t, err)
	p, views := tfrecord.NewParser(sp), tfrecord.NewParser(sp)
	for i := range 20 {
		var x tfrecord.Example
		x.Bytes("image/encoded", bytes.Repeat([]byte{byte(i)}, (i*7)%13))
		x.Int64("label", int64(i))
		x.Float("pair", float32(i), -float32(i))
		if i%3 > 0 {
			x.Int64("tokens", make([]int64, i%5)...)
		}
		want, err := p.Parse(x.Marshal())
		require.NoError(t, err)
		got, err := views.ParseViews(x.Marshal())
		require.NoError(t, err)
		require.True(t, want.Equal(got), "record %d: %v, want %v", i, got, want)
	}
}

// varintBomb is an Example whose int64 feature x is n one-byte packed
// varints: n bytes on the wire, 8n as slots.
func varintBomb(n int) []byte {
	list := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bytes.Repeat([]byte{1}, n))
	feature := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), list)
	entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("x"))
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), feature)
	features := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), features)
}

// A record whose int64 list decodes past MaxSampleBytes (one-byte varints,
// 8 bytes of slots each) is refused by name before its slots are made:
// both parsers allocate a small part of the record's own bytes for it.
// Before, a 100 MB record of them took 4.2 GB through a job.
func TestAVarintBombIsRefusedBeforeItsSlotsAreMade(t *testing.T) {
	n := tfrecord.MaxSampleBytes/8 + 1
	msg := varintBomb(n)
	spec := tfrecord.Spec{{Name: "x", Kind: tfrecord.Int64, Shape: []int{-1}}}
	for _, parse := range []func(*tfrecord.Parser, []byte) (tensor.Slots, error){(*tfrecord.Parser).Parse, (*tfrecord.Parser).ParseViews} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := parse(tfrecord.NewParser(spec), msg)
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, format.ErrCorrupt)
		require.ErrorContains(t, err, "more than a sample may hold (feature x alone 268435464)")
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(len(msg)/4), "bytes allocated to refuse it")
	}
	s, err := tfrecord.NewParser(spec).Parse(varintBomb(n - 1)) // at the bound: read
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{n - 1}, s[0].Shape())
}
