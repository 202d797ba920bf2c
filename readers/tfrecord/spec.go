package tfrecord

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/actorfeed/actorfeed/tensor"
)

// Kind is the list a feature holds: tf.train.Feature's oneof.
type Kind uint8

// The kinds of tf.train.Feature, numbered as its fields are.
const (
	Bytes Kind = 1
	Float Kind = 2
	Int64 Kind = 3
)

func (k Kind) String() string {
	switch k {
	case Bytes:
		return "bytes"
	case Float:
		return "float"
	case Int64:
		return "int64"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Limits on a spec a user gives.
const (
	MaxFeatures = 256     // features in a spec
	maxValues   = 1 << 26 // values a fixed shape may ask for
)

// Feature is one slot of an Example: its name, kind and shape.
//
// Shape nil is one value: a bytes feature's value becomes a uint8
// sequence ([n], LoD [[0, n]]), a float or int64 feature's a [1] tensor.
// Shape []int{-1} is any number of float or int64 values, a sequence ([k],
// LoD [[0, k]]); a feature a record lacks is then an empty one. Any other
// shape is that many values, a [1, shape...] tensor.
type Feature struct {
	Name  string
	Kind  Kind
	Shape []int
}

// Spec is the features read from every record, in the order of the slots.
type Spec []Feature

// variable reports whether f takes any number of values.
func (f Feature) variable() bool { return len(f.Shape) == 1 && f.Shape[0] == -1 }

// values is the number of values a fixed feature takes.
func (f Feature) values() int {
	n := 1
	for _, d := range f.Shape {
		n *= d
	}
	return n
}

func (f Feature) String() string {
	switch {
	case f.Shape == nil:
		return f.Name + "=" + f.Kind.String()
	case f.variable():
		return f.Name + "=" + f.Kind.String() + "[]"
	}
	dims := make([]string, len(f.Shape))
	for i, d := range f.Shape {
		dims[i] = strconv.Itoa(d)
	}
	return f.Name + "=" + f.Kind.String() + "[" + strings.Join(dims, ",") + "]"
}

// String is the spec as ParseSpec reads it.
func (s Spec) String() string {
	parts := make([]string, len(s))
	for i, f := range s {
		parts[i] = f.String()
	}
	return strings.Join(parts, ",")
}

// Names are the features' names, the slots' names.
func (s Spec) Names() []string {
	out := make([]string, len(s))
	for i, f := range s {
		out[i] = f.Name
	}
	return out
}

// ParseSpec reads a spec: features separated by commas, each
// name=kind or name=kind[dims], kind one of bytes, float and int64, dims
// empty (any number) or positive sizes separated by commas
// ("image/encoded=bytes,label=int64,bbox=float[],embedding=float[8,16]").
func ParseSpec(s string) (Spec, error) {
	var out Spec
	seen := map[string]bool{}
	for rest := strings.TrimSpace(s); rest != ""; {
		item, after, err := cutFeature(rest)
		if err != nil {
			return nil, err
		}
		f, err := parseFeature(item)
		if err != nil {
			return nil, err
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("tfrecord: spec %q names feature %s twice", s, f.Name)
		}
		seen[f.Name] = true
		if out = append(out, f); len(out) > MaxFeatures {
			return nil, fmt.Errorf("tfrecord: spec %q: more than %d features", s, MaxFeatures)
		}
		rest = strings.TrimSpace(after)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tfrecord: an empty spec: give features as name=kind, separated by commas")
	}
	return out, nil
}

// cutFeature cuts the first feature off s: up to a comma outside brackets.
func cutFeature(s string) (item, rest string, err error) {
	depth := 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				return s[:i], s[i+1:], nil
			}
		}
	}
	if depth != 0 {
		return "", "", fmt.Errorf("tfrecord: spec %q: unbalanced brackets", s)
	}
	return s, "", nil
}

func parseFeature(item string) (Feature, error) {
	name, typ, ok := strings.Cut(strings.TrimSpace(item), "=")
	name, typ = strings.TrimSpace(name), strings.TrimSpace(typ)
	if !ok || name == "" || strings.ContainsAny(name, "()[],=:") {
		return Feature{}, fmt.Errorf("tfrecord: spec item %q: want name=kind (no ()[],=: in a name)", item)
	}
	kindName, dims, shaped := strings.Cut(typ, "[")
	f := Feature{Name: name}
	switch strings.TrimSpace(kindName) {
	case "bytes":
		f.Kind = Bytes
	case "float":
		f.Kind = Float
	case "int64":
		f.Kind = Int64
	default:
		return Feature{}, fmt.Errorf("tfrecord: feature %s: kind %q: want bytes, float or int64", name, kindName)
	}
	if !shaped {
		return f, nil
	}
	if f.Kind == Bytes {
		return Feature{}, fmt.Errorf("tfrecord: feature %s: a bytes feature holds one value, without a shape", name)
	}
	dims, ok = strings.CutSuffix(strings.TrimSpace(dims), "]")
	if !ok {
		return Feature{}, fmt.Errorf("tfrecord: feature %s: shape %q: want [] or [d1,d2,...]", name, typ)
	}
	if strings.TrimSpace(dims) == "" {
		f.Shape = []int{-1}
		return f, nil
	}
	total := 1
	for _, d := range strings.Split(dims, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil || n <= 0 || n > maxValues || total*n > maxValues {
			return Feature{}, fmt.Errorf("tfrecord: feature %s: shape [%s]: want sizes from 1, at most %d values", name, dims, maxValues)
		}
		total *= n
		f.Shape = append(f.Shape, n)
	}
	return f, nil
}

// dtype is the tensor type of a kind's values.
func (k Kind) dtype() tensor.DType {
	switch k {
	case Float:
		return tensor.Float32
	case Int64:
		return tensor.Int64
	}
	return tensor.Uint8
}
