package tfrecord

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/tensor"
)

// An Example on the wire (tensorflow/core/example/example.proto and
// feature.proto): Example{features = 1}, Features{map<string, Feature>
// feature = 1}, a map entry {key = 1, value = 2}, Feature{oneof
// bytes_list = 1, float_list = 2, int64_list = 3}, each list {repeated
// value = 1}, float and int64 values packed or not. It is walked, not
// unmarshalled: only the spec's features are looked at, and every
// allocation is sized by bytes the record holds.

// Parser makes slots of Examples by a spec. It is not safe for concurrent
// use.
type Parser struct {
	spec  Spec
	index map[string]int
	found [][]byte // each feature's last Feature message in the record
	has   []bool
	lists [][]byte // a feature's lists, reused
	// views is ParseViews' scratch, one a feature: its slots, and the
	// storage, shapes and LoD they are made of.
	views  tensor.Slots
	bufs   [][]byte
	shapes []tensor.Shape
	lods   []tensor.LoD
	// decoded counts the bytes of the record's slots made so far.
	decoded int
}

// MaxSampleBytes bounds the slots one record decodes to. An int64 list
// decodes to 8 bytes a value, 8 times its bytes on the wire when its
// varints are one byte each: a record within MaxRecordBytes could decode
// to 2 GiB, and a job's stages each hold a copy of it. A record past it is
// refused, by name, before its slots are allocated.
const MaxSampleBytes = 256 << 20

// NewParser parses by spec.
func NewParser(spec Spec) *Parser {
	p := &Parser{spec: spec, index: make(map[string]int, len(spec)), found: make([][]byte, len(spec)), has: make([]bool, len(spec))}
	for i, f := range spec {
		p.index[f.Name] = i
	}
	return p
}

// Spec is the spec the parser reads by.
func (p *Parser) Spec() Spec { return p.spec }

// Parse makes the slots of the Example in data, one a feature of the
// spec, in its order. The slots do not alias data. Errors match
// format.ErrCorrupt.
func (p *Parser) Parse(data []byte) (tensor.Slots, error) {
	if err := p.walk(data); err != nil {
		return nil, err
	}
	slots := make(tensor.Slots, len(p.spec))
	p.decoded = 0
	for i, f := range p.spec {
		var err error
		if slots[i], err = p.value(f, p.found[i], p.has[i], nil); err != nil {
			return nil, err
		}
	}
	return slots, nil
}

// ParseViews is Parse into slots that share data and the parser's storage:
// they hold until the next call, and nothing is allocated for them once the
// parser has seen a record of their sizes. A reader that copies the
// Example at once (onto a tensor.Stack) reads by it.
func (p *Parser) ParseViews(data []byte) (tensor.Slots, error) {
	if err := p.walk(data); err != nil {
		return nil, err
	}
	if p.views == nil {
		n := len(p.spec)
		p.views, p.bufs, p.shapes, p.lods = make(tensor.Slots, n), make([][]byte, n), make([]tensor.Shape, n), make([]tensor.LoD, n)
		for i, f := range p.spec {
			p.shapes[i] = append(tensor.Shape{1}, f.Shape...)
			if f.variable() || f.Kind == Bytes {
				p.shapes[i], p.lods[i] = tensor.Shape{0}, tensor.LoD{{0, 0}}
			}
		}
	}
	p.decoded = 0
	for i, f := range p.spec {
		var err error
		if p.views[i], err = p.value(f, p.found[i], p.has[i], &scratch{p, i}); err != nil {
			return nil, err
		}
	}
	return p.views, nil
}

// scratch is feature i's storage for ParseViews.
type scratch struct {
	p *Parser
	i int
}

// tensor is the feature's tensor of n values of dt (a sequence when it has
// LoD), over its own storage, or over data when given.
func (s *scratch) tensor(dt tensor.DType, n int, data []byte) (tensor.LoDTensor, error) {
	shape, lod := s.p.shapes[s.i], s.p.lods[s.i]
	if lod != nil {
		shape[0], lod[0][1] = n, n
	}
	if data == nil {
		size := n * dt.Size()
		if cap(s.p.bufs[s.i]) < size {
			z, err := tensor.Zeros(dt, tensor.Shape{n})
			if err != nil {
				return tensor.LoDTensor{}, err
			}
			s.p.bufs[s.i] = z.Bytes()
		}
		data = s.p.bufs[s.i][:size]
	}
	t, err := tensor.WrapBytes(dt, shape, data)
	return tensor.LoDTensor{Tensor: t, LoD: lod}, err
}

// walk finds the spec's features in the Example in data.
func (p *Parser) walk(data []byte) error {
	clear(p.found)
	clear(p.has)
	err := fields(data, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		return fields(v, func(num protowire.Number, entry []byte) error {
			if num == 1 {
				return p.entry(entry)
			}
			return nil
		})
	})
	return err
}

// entry keeps a map entry's Feature when its key is in the spec; a later
// entry for the same key replaces it, as protobuf merges maps. Every
// entry's Feature is checked, those of other keys and those replaced
// too: protobuf refuses an Example with any malformed part, and a record
// protobuf refuses is not read here either.
func (p *Parser) entry(b []byte) error {
	key, value, err := mapEntry(b)
	if err != nil {
		return err
	}
	if err := checkFeature(value); err != nil {
		return fmt.Errorf("feature %q: %w", key, err)
	}
	if i, ok := p.index[string(key)]; ok {
		p.found[i], p.has[i] = value, true
	}
	return nil
}

// checkFeature checks a Feature message's wire form as protobuf parses
// it: its lists, and their values, packed or not.
func checkFeature(b []byte) error {
	return fields(b, func(num protowire.Number, v []byte) error {
		switch Kind(num) {
		case Bytes:
			return fields(v, func(protowire.Number, []byte) error { return nil })
		case Float, Int64:
			_, err := count(Kind(num), [][]byte{v})
			return err
		}
		return nil
	})
}

// mapEntry is a map entry's key and value. The key, a proto3 string, must
// be UTF-8, as protobuf requires. A value given more than once is their
// merge, as protobuf merges a message field given twice: their encodings
// one after the other (a copy, only then).
func mapEntry(b []byte) (key, value []byte, err error) {
	values := 0
	err = fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			if !utf8.Valid(v) { // each, a replaced one too, as protobuf checks
				return format.Corrupt("a feature's name is not UTF-8: %q", v)
			}
			key = v
		case 2:
			if values++; values == 2 {
				value = append(slices.Clip(value), v...)
			} else if values > 2 {
				value = append(value, v...)
			} else {
				value = v
			}
		}
		return nil
	})
	return key, value, err
}

// value makes feature f's tensor from its Feature message b: in storage
// of its own, or in s's when given.
func (p *Parser) value(f Feature, b []byte, present bool, s *scratch) (tensor.LoDTensor, error) {
	kind, lists, err := featureLists(b, p.lists[:0])
	p.lists = lists[:0]
	if err != nil {
		return tensor.LoDTensor{}, err
	}
	if !present || kind == 0 {
		if !f.variable() {
			return tensor.LoDTensor{}, format.Corrupt("the record has no feature %s", f.Name)
		}
		if s != nil {
			return s.tensor(f.Kind.dtype(), 0, nil)
		}
		return sequence(f.Kind.dtype(), 0)
	}
	if kind != f.Kind {
		return tensor.LoDTensor{}, format.Corrupt("feature %s holds a %s list, the spec says %s", f.Name, kind, f.Kind)
	}
	if kind == Bytes {
		one, err := bytesValue(f, lists)
		if err != nil {
			return tensor.LoDTensor{}, err
		}
		if s != nil {
			return s.tensor(tensor.Uint8, len(one), one)
		}
		if err := p.decodes(f, len(one)); err != nil {
			return tensor.LoDTensor{}, err
		}
		t, err := sequence(tensor.Uint8, len(one))
		copy(t.Bytes(), one)
		return t, err
	}
	n, err := count(kind, lists)
	if err != nil {
		return tensor.LoDTensor{}, fmt.Errorf("feature %s: %w", f.Name, err)
	}
	if !f.variable() && n != f.values() {
		return tensor.LoDTensor{}, format.Corrupt("feature %s holds %d values, the spec (%s) wants %d", f.Name, n, f, f.values())
	}
	if err := p.decodes(f, n*kind.dtype().Size()); err != nil {
		return tensor.LoDTensor{}, err
	}
	var t tensor.LoDTensor
	switch {
	case s != nil:
		t, err = s.tensor(kind.dtype(), n, nil)
	case f.variable():
		t, err = sequence(kind.dtype(), n)
	default:
		var d tensor.Tensor
		d, err = tensor.Zeros(kind.dtype(), append(tensor.Shape{1}, f.Shape...))
		t = tensor.LoDTensor{Tensor: d}
	}
	if err != nil {
		return tensor.LoDTensor{}, err
	}
	fill(kind, lists, t.Bytes())
	return t, nil
}

// decodes counts the bytes feature f's slot takes, refusing the record
// when its slots would hold more than MaxSampleBytes.
func (p *Parser) decodes(f Feature, bytes int) error {
	if p.decoded += bytes; p.decoded > MaxSampleBytes {
		return format.Corrupt("the record decodes to more than %d bytes, more than a sample may hold (feature %s alone %d)", MaxSampleBytes, f.Name, bytes)
	}
	return nil
}

// sequence is a [n] tensor of dt with LoD [[0, n]].
func sequence(dt tensor.DType, n int) (tensor.LoDTensor, error) {
	d, err := tensor.Zeros(dt, tensor.Shape{n})
	if err != nil {
		return tensor.LoDTensor{}, err
	}
	return tensor.NewLoDTensor(d, tensor.LoD{{0, n}})
}

// bytesValue is a bytes feature's one value.
func bytesValue(f Feature, lists [][]byte) ([]byte, error) {
	var one []byte
	n := 0
	for _, l := range lists {
		err := fields(l, func(num protowire.Number, v []byte) error {
			if num == 1 {
				one, n = v, n+1
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("feature %s: %w", f.Name, err)
		}
	}
	if n != 1 {
		return nil, format.Corrupt("feature %s holds %d byte strings, a bytes feature one", f.Name, n)
	}
	return one, nil
}

// featureLists are the lists of a Feature message's kind, appended to
// lists: the last kind on the wire wins (a oneof), and a kind's messages
// concatenate (repeated fields of a message given twice merge).
func featureLists(b []byte, lists [][]byte) (Kind, [][]byte, error) {
	var kind Kind
	err := fields(b, func(num protowire.Number, v []byte) error {
		if num < 1 || num > 3 {
			return nil
		}
		if Kind(num) != kind {
			kind, lists = Kind(num), lists[:0]
		}
		lists = append(lists, v)
		return nil
	})
	return kind, lists, err
}

// count is the number of values in float or int64 lists.
func count(kind Kind, lists [][]byte) (int, error) {
	n := 0
	for _, l := range lists {
		for len(l) > 0 {
			num, typ, m := protowire.ConsumeTag(l)
			if m < 0 {
				return 0, wireError(m)
			}
			l = l[m:]
			switch {
			case num == 1 && kind == Float && typ == protowire.Fixed32Type, num == 1 && kind == Int64 && typ == protowire.VarintType:
				n++
			case num == 1 && typ == protowire.BytesType:
				v, m := protowire.ConsumeBytes(l)
				if m < 0 {
					return 0, wireError(m)
				}
				k, err := packed(kind, v)
				if err != nil {
					return 0, err
				}
				n += k
				l = l[m:]
				continue
			}
			if m = protowire.ConsumeFieldValue(num, typ, l); m < 0 {
				return 0, wireError(m)
			}
			l = l[m:]
		}
	}
	return n, nil
}

// packed is the number of values in a packed list.
func packed(kind Kind, v []byte) (int, error) {
	if kind == Float {
		if len(v)%4 != 0 {
			return 0, format.Corrupt("a packed float list of %d bytes", len(v))
		}
		return len(v) / 4, nil
	}
	n := 0
	for len(v) > 0 {
		_, m := protowire.ConsumeVarint(v)
		if m < 0 {
			return 0, wireError(m)
		}
		v, n = v[m:], n+1
	}
	return n, nil
}

// fill writes the values of lists, which count checked, to out as little
// endian float32 or int64, skipping what count skipped.
func fill(kind Kind, lists [][]byte, out []byte) {
	for _, l := range lists {
		for len(l) > 0 {
			num, typ, m := protowire.ConsumeTag(l)
			l = l[m:]
			switch {
			case num == 1 && typ == protowire.BytesType:
				v, m := protowire.ConsumeBytes(l)
				out = putPacked(kind, v, out)
				l = l[m:]
			case num == 1 && kind == Float && typ == protowire.Fixed32Type:
				out, l = out[copy(out, l[:4]):], l[4:]
			case num == 1 && kind == Int64 && typ == protowire.VarintType:
				x, m := protowire.ConsumeVarint(l)
				binary.LittleEndian.PutUint64(out, x)
				out, l = out[8:], l[m:]
			default:
				l = l[protowire.ConsumeFieldValue(num, typ, l):]
			}
		}
	}
}

// putPacked writes a packed list's values to out and returns the rest.
func putPacked(kind Kind, v, out []byte) []byte {
	if kind == Float {
		return out[copy(out, v):]
	}
	for len(v) > 0 {
		x, m := protowire.ConsumeVarint(v)
		binary.LittleEndian.PutUint64(out, x)
		v, out = v[m:], out[8:]
	}
	return out
}

// fields calls fn with each length-delimited field of the message b; it
// skips the others.
func fields(b []byte, fn func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return wireError(m)
		}
		b = b[m:]
		if typ != protowire.BytesType {
			if m = protowire.ConsumeFieldValue(num, typ, b); m < 0 {
				return wireError(m)
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return wireError(m)
		}
		if err := fn(num, v); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}

func wireError(code int) error {
	return format.Corrupt("not a tf.train.Example: %v", protowire.ParseError(code))
}

// Infer is the spec of the Example in data: its features sorted by name;
// a bytes feature with one value is bytes, a float or int64 feature with
// one value is one value, with any other number any number.
func Infer(data []byte) (Spec, error) {
	var spec Spec
	seen := map[string]int{}
	err := fields(data, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		return fields(v, func(num protowire.Number, entry []byte) error {
			if num != 1 {
				return nil
			}
			return inferEntry(entry, &spec, seen)
		})
	})
	if err != nil {
		return nil, err
	}
	spec = slices.DeleteFunc(spec, func(f Feature) bool { return f.Kind == 0 })
	if len(spec) == 0 {
		return nil, format.Corrupt("the first record holds no features to read")
	}
	if len(spec) > MaxFeatures {
		return nil, format.Corrupt("the first record holds %d features, more than %d: give a spec", len(spec), MaxFeatures)
	}
	slices.SortFunc(spec, func(a, b Feature) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return spec, nil
}

func inferEntry(entry []byte, spec *Spec, seen map[string]int) error {
	key, value, err := mapEntry(entry)
	if err != nil {
		return err
	}
	kind, lists, err := featureLists(value, nil)
	if err != nil {
		return err
	}
	// A Feature of no list (kind 0) is kept as such, for a later entry
	// of the same key to replace, and it to replace an earlier one: the
	// key's last entry is the Example's, as protobuf merges a map.
	f := Feature{Name: string(key), Kind: kind}
	if kind != Bytes && kind != 0 {
		n, err := count(kind, lists)
		if err != nil {
			return err
		}
		if n != 1 {
			f.Shape = []int{-1}
		}
	}
	if i, ok := seen[f.Name]; ok {
		(*spec)[i] = f
		return nil
	}
	seen[f.Name] = len(*spec)
	*spec = append(*spec, f)
	return nil
}
