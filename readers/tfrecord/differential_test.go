package tfrecord_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/tensor"
)

// agreeWithProtobuf requires actorfeed and a reader built from Python's
// crc32c and protobuf to agree on the TFRecord file b record by record
// (each record's every feature, kind and values, read by the spec its
// record gives), or actorfeed to refuse by name where they part: a
// record actorfeed hands out is one Python reads alike; a file actorfeed
// reads to its end, Python reads to its end.
func agreeWithProtobuf(t *testing.T, o *oracle.Oracle, b []byte) {
	t.Helper()
	py, perr := o.TFRecord(b)
	r := tfrecord.NewReader(bytes.NewReader(b), "fuzz.tfrecord")
	for i := 0; ; i++ {
		data, err := r.Next()
		if errors.Is(err, io.EOF) {
			require.NoError(t, perr, "actorfeed read the file to its end, Python did not")
			require.Len(t, py, i, "records")
			return
		}
		if err != nil {
			var fe *format.Error
			require.ErrorAs(t, err, &fe, "a refusal names the file")
			require.Equal(t, "fuzz.tfrecord", fe.File)
			if !r.Broken() { // a record's data failed its checksum: the next is read
				require.Less(t, i, len(py), "a record Python does not find")
				require.Equal(t, "data checksum", py[i].Err, "record %d", i)
				continue
			}
			require.GreaterOrEqual(t, len(py), i, "actorfeed framed records Python does not find (%v)", perr)
			return
		}
		slots, spec, ok := parse(data)
		if i >= len(py) || py[i].Err != "" {
			why := perr
			if i < len(py) {
				why = errors.New(py[i].Err)
			}
			require.False(t, ok, "actorfeed reads record %d, which Python does not (%v)", i, why)
			if i >= len(py) {
				return
			}
			continue
		}
		if ok {
			sameRecord(t, i, py[i].Features, spec, slots)
		}
	}
}

// parse is record data's slots by the spec it gives itself; false where
// actorfeed refuses it.
func parse(data []byte) (tensor.Slots, tfrecord.Spec, bool) {
	spec, err := tfrecord.Infer(data)
	if err != nil {
		return nil, nil, false
	}
	slots, err := tfrecord.NewParser(spec).Parse(data)
	return slots, spec, err == nil
}

// sameRecord requires actorfeed's slots of record i, by spec, to be the
// features Python read.
func sameRecord(t *testing.T, i int, want map[string]oracle.Feature, spec tfrecord.Spec, slots tensor.Slots) {
	t.Helper()
	seen := 0
	for name, f := range want {
		if f.Kind == "none" { // a Feature of no list: no slot
			continue
		}
		seen++
		k := -1
		for j, s := range spec {
			if s.Name == name {
				k = j
			}
		}
		require.GreaterOrEqual(t, k, 0, "record %d: feature %q missing", i, name)
		s := slots[k]
		switch f.Kind {
		case "bytes":
			require.Len(t, f.Bytes, 1, "record %d: %q: actorfeed reads one byte string a feature", i, name)
			require.Equal(t, f.Bytes[0], s.Bytes(), "record %d: %q", i, name)
		case "int64":
			v, err := tensor.View[int64](s.Tensor)
			require.NoError(t, err)
			require.Equal(t, f.Ints, append([]int64{}, v...), "record %d: %q", i, name)
		case "float":
			v, err := tensor.View[float32](s.Tensor)
			require.NoError(t, err)
			bits := make([]uint32, len(v))
			for j, x := range v {
				bits[j] = math.Float32bits(x)
			}
			require.Equal(t, f.Floats, bits, "record %d: %q", i, name)
		}
	}
	require.Len(t, spec, seen, "record %d: features", i)
}

// framed is records framed as TFRecord does it.
func framed(t testing.TB, records ...[]byte) []byte {
	var b bytes.Buffer
	w := tfrecord.NewWriter(&b)
	for _, r := range records {
		require.NoError(t, w.Write(r))
	}
	return b.Bytes()
}

// oddExamples are Examples protobuf allows and writers rarely write, by
// name: lists unpacked, packed in pieces, a oneof and a map key given
// twice, an empty Feature, unknown fields, a bytes feature of two values.
func oddExamples() map[string][]byte {
	tag := func(b []byte, n protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(b, n, typ) }
	msg := func(n protowire.Number, body []byte) []byte {
		return protowire.AppendBytes(tag(nil, n, protowire.BytesType), body)
	}
	entry := func(key string, feature []byte) []byte {
		return msg(1, append(msg(1, []byte(key)), msg(2, feature)...))
	}
	example := func(entries ...[]byte) []byte {
		var f []byte
		for _, e := range entries {
			f = append(f, e...)
		}
		return msg(1, f)
	}
	unpacked := tag(nil, 1, protowire.VarintType)
	unpacked = protowire.AppendVarint(unpacked, 7)
	unpacked = protowire.AppendVarint(tag(unpacked, 1, protowire.VarintType), math.MaxUint64)
	pieces := append(msg(1, []byte{1, 2}), msg(1, []byte{3})...)
	floats := tag(nil, 1, protowire.Fixed32Type)
	floats = binary.LittleEndian.AppendUint32(floats, math.Float32bits(1.5))
	unknown := protowire.AppendVarint(tag(nil, 9, protowire.VarintType), 5)
	return map[string][]byte{
		"unpacked":      example(entry("x", msg(3, unpacked))),
		"in pieces":     example(entry("x", msg(3, pieces))),
		"unpacked f":    example(entry("f", msg(2, floats))),
		"oneof twice":   example(entry("x", append(msg(1, msg(1, []byte("b"))), msg(3, pieces)...))),
		"key twice":     example(entry("x", msg(3, pieces)), entry("x", msg(1, msg(1, []byte("later"))))),
		"empty feature": example(entry("e", nil), entry("x", msg(3, pieces))),
		"unknown":       append(example(entry("x", append(msg(3, pieces), unknown...))), unknown...),
		"two strings":   example(entry("s", msg(1, append(msg(1, []byte("a")), msg(1, []byte("b"))...)))),
	}
}

// Files written by this package, and records of odd Examples, read alike
// by actorfeed and protobuf (or are refused by name).
func TestTFRecordsAgreeWithProtobuf(t *testing.T) {
	o := oracle.Start(t)
	agreeWithProtobuf(t, o, file(t, 6))
	for name, ex := range oddExamples() {
		t.Run(name, func(t *testing.T) { agreeWithProtobuf(t, o, framed(t, ex, ex)) })
	}
}

// FuzzTFRecordsAgainstProtobuf mutates TFRecord files and requires
// actorfeed and Python's crc32c and protobuf to agree, or actorfeed to
// refuse by name, as TestTFRecordsAgreeWithProtobuf does. With fix, every
// record's checksums are made right first, so that mutations reach the
// Examples.
func FuzzTFRecordsAgainstProtobuf(f *testing.F) {
	f.Add(file(f, 3), true)
	for _, ex := range oddExamples() {
		f.Add(framed(f, ex), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			b = refresh(b)
		}
		agreeWithProtobuf(t, oracle.Shared(t), b)
	})
}

// refresh rewrites b's records' checksums, as far as its lengths frame it.
func refresh(b []byte) []byte {
	var out bytes.Buffer
	w := tfrecord.NewWriter(&out)
	for len(b) >= 12 {
		n := binary.LittleEndian.Uint64(b)
		if n > uint64(len(b)-12) {
			break
		}
		end := min(uint64(len(b)), 16+n)
		w.Write(b[12 : 12+n])
		b = b[end:]
	}
	return append(out.Bytes(), b...)
}
