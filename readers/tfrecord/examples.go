package tfrecord

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/actorfeed/actorfeed/tensor"
)

// Examples reads the tf.train.Example records of a file as slots.
type Examples struct {
	*Reader
	parser *Parser
}

// NewExamples reads r's records by spec; a nil spec is inferred from the
// first record (Infer).
func NewExamples(r *Reader, spec Spec) *Examples {
	e := &Examples{Reader: r}
	if spec != nil {
		e.parser = NewParser(spec)
	}
	return e
}

// Next returns the next record's slots, or io.EOF after the last. An error
// in an Example leaves the reader at the next record, as one in its data's
// checksum does.
func (e *Examples) Next() (tensor.Slots, error) {
	data, err := e.next()
	if err != nil {
		return nil, err
	}
	slots, err := e.parser.Parse(data)
	if err != nil {
		return nil, e.Fail(err)
	}
	return slots, nil
}

// NextOnto reads the next record onto st when it stacks and returns nil;
// otherwise it returns it as Next does. A record that stacks is parsed
// straight onto the stack (Parser.ParseViews).
func (e *Examples) NextOnto(st *tensor.Stack) (tensor.Slots, error) {
	data, err := e.next()
	if err != nil {
		return nil, err
	}
	views, err := e.parser.ParseViews(data)
	if err != nil {
		return nil, e.Fail(err)
	}
	if st.Append(views) {
		return nil, nil
	}
	return views.Clone(), nil
}

// next is the next record's data, with the parser for it.
func (e *Examples) next() ([]byte, error) {
	data, err := e.Reader.Next()
	if err != nil {
		return nil, err
	}
	if e.parser == nil {
		spec, err := Infer(data)
		if err != nil {
			return nil, e.Fail(err)
		}
		e.parser = NewParser(spec)
	}
	return data, nil
}

// Spec is the spec the records are read by; nil until the first record is
// read when it is inferred.
func (e *Examples) Spec() Spec {
	if e.parser == nil {
		return nil
	}
	return e.parser.Spec()
}

// Example builds a tf.train.Example's encoding, feature by feature.
type Example struct{ features []byte }

// Bytes adds a bytes feature.
func (x *Example) Bytes(name string, values ...[]byte) {
	var list []byte
	for _, v := range values {
		list = protowire.AppendTag(list, 1, protowire.BytesType)
		list = protowire.AppendBytes(list, v)
	}
	x.add(name, Bytes, list)
}

// Int64 adds an int64 feature, packed.
func (x *Example) Int64(name string, values ...int64) {
	var packed []byte
	for _, v := range values {
		packed = protowire.AppendVarint(packed, uint64(v))
	}
	x.add(name, Int64, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), packed))
}

// Float adds a float feature, packed.
func (x *Example) Float(name string, values ...float32) {
	var packed []byte
	for _, v := range values {
		packed = protowire.AppendFixed32(packed, math.Float32bits(v))
	}
	x.add(name, Float, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), packed))
}

func (x *Example) add(name string, kind Kind, list []byte) {
	feature := protowire.AppendBytes(protowire.AppendTag(nil, protowire.Number(kind), protowire.BytesType), list)
	entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte(name))
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), feature)
	x.features = protowire.AppendBytes(protowire.AppendTag(x.features, 1, protowire.BytesType), entry)
}

// Marshal is the Example's encoding.
func (x *Example) Marshal() []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), x.features)
}
