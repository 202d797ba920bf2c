package sim

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/actorfeed/actorfeed/internal/yamlline"
)

// ParseSchedule reads a fault schedule written in YAML (docs/simulation.md):
//
//	faults:
//	  - kind: latency
//	    files: "part-*.recordio"
//	    dist: {lognormal: {median: 2ms, p99: 50ms}}
//	    from: 10s
//	    until: 40s
//
// Every key is checked: an unknown key, a field the kind does not take, a
// value of the wrong type or out of range is a *ScheduleError naming the
// line, the fault and what was expected.
func ParseSchedule(data []byte) (*Schedule, error) {
	if len(data) > MaxScheduleBytes {
		return nil, &ScheduleError{Msg: fmt.Sprintf("%d bytes, more than the limit %d", len(data), MaxScheduleBytes)}
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		return nil, yamlError(data, err)
	}
	if len(doc.Content) == 0 {
		return nil, &ScheduleError{Msg: "empty: want faults: [...]"}
	}
	root := doc.Content[0]
	if err := onlyKeys(root, "top level", "faults"); err != nil {
		return nil, err
	}
	list := mapValue(root, "faults")
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil, &ScheduleError{Line: root.Line, Msg: "faults: want a list of faults"}
	}
	if len(list.Content) > MaxFaults {
		return nil, &ScheduleError{Line: list.Line, Msg: fmt.Sprintf("%d faults, more than the limit %d", len(list.Content), MaxFaults)}
	}
	s := &Schedule{}
	for i, n := range list.Content {
		f, err := parseFault(n)
		if err != nil {
			var se *ScheduleError
			if errors.As(err, &se) {
				se.Fault, se.Kind = i+1, f.Kind
			}
			return nil, err
		}
		s.Faults = append(s.Faults, f)
	}
	return s, s.Check()
}

// yamlError turns the YAML library's error into a ScheduleError, on the
// line where the text goes wrong.
func yamlError(data []byte, err error) error {
	line, msg := yamlline.Locate(data, err)
	return &ScheduleError{Line: line, Msg: msg}
}

var lineRE = regexp.MustCompile(`^line (\d+): `)

var faultKeys = []string{"kind", "files", "stage", "device", "devices", "from", "until", "at", "p", "times", "rate",
	"dist", "factor", "length", "count", "bytes"}

// parseFault reads one fault's mapping; the returned fault has its kind
// even when it fails, for the error.
func parseFault(n *yaml.Node) (FaultSpec, error) {
	f := FaultSpec{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return f, &ScheduleError{Line: n.Line, Msg: "want a mapping such as {kind: latency, files: '*', dist: {fixed: 5ms}}"}
	}
	if k := mapValue(n, "kind"); k != nil && k.Kind == yaml.ScalarNode {
		f.Kind = FaultKind(k.Value) // for the errors below
	}
	if err := onlyKeys(n, "a fault", faultKeys...); err != nil {
		return f, err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, n.Content[i+1]
		if err := f.setField(key, v); err != nil {
			return f, &ScheduleError{Line: v.Line, Msg: key + ": " + err.Error()}
		}
	}
	if f.Kind == "" {
		return f, &ScheduleError{Line: n.Line, Msg: "kind: want one of " + strings.Join(Kinds(), ", ")}
	}
	return f, nil
}

// setField sets the field key from v.
func (f *FaultSpec) setField(key string, v *yaml.Node) error {
	var err error
	switch key {
	case "kind":
		var k string
		err = v.Decode(&k)
		f.Kind = FaultKind(k)
	case "files":
		err = v.Decode(&f.Files)
	case "stage":
		err = v.Decode(&f.Stage)
	case "device", "devices":
		f.Devices, err = intList(v)
	case "from":
		f.From, err = duration(v)
	case "until":
		f.Until, err = duration(v)
	case "at":
		err = positive(v, &f.At)
	case "p":
		err = v.Decode(&f.P)
		if err == nil && f.P <= 0 {
			err = fmt.Errorf("want a probability in (0, 1], got %g", f.P)
		}
	case "times":
		f.Times, err = durations(v)
	case "rate":
		err = v.Decode(&f.Rate)
		if err == nil && f.Rate <= 0 {
			err = fmt.Errorf("want stalls per second > 0, got %g", f.Rate)
		}
	case "dist":
		f.Dist, err = parseDist(v)
	case "factor":
		err = v.Decode(&f.Factor)
		if err == nil && f.Factor < 1 {
			err = fmt.Errorf("want a slowdown >= 1, got %g", f.Factor)
		}
	case "length":
		f.Length, err = duration(v)
		if err == nil && f.Length <= 0 {
			err = fmt.Errorf("want a duration > 0, got %v", f.Length)
		}
	case "count":
		err = positive(v, &f.Count)
	case "bytes":
		err = v.Decode(&f.Bytes)
		if err == nil && f.Bytes <= 0 {
			err = fmt.Errorf("want an integer >= 1, got %d", f.Bytes)
		}
	}
	return plainError(err)
}

// plainError drops the YAML library's "yaml: unmarshal errors:\n  line
// N:" wrapping: the caller names the line.
func plainError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg := te.Errors[0]
		if m := lineRE.FindStringSubmatch(msg); m != nil {
			msg = strings.TrimPrefix(msg, m[0])
		}
		return errors.New(msg)
	}
	return err
}

func positive(v *yaml.Node, dst *int) error {
	if err := v.Decode(dst); err != nil {
		return err
	}
	if *dst < 1 {
		return fmt.Errorf("want an integer >= 1, got %d", *dst)
	}
	return nil
}

// intList accepts one integer or a list of them.
func intList(v *yaml.Node) ([]int, error) {
	if v.Kind == yaml.ScalarNode {
		var x int
		err := v.Decode(&x)
		return []int{x}, err
	}
	var xs []int
	err := v.Decode(&xs)
	return xs, err
}

// duration reads a duration such as 5ms or 2s.
func duration(v *yaml.Node) (time.Duration, error) {
	var s string
	if v.Kind != yaml.ScalarNode || v.Decode(&s) != nil {
		return 0, fmt.Errorf("want a duration such as 5ms")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 5ms, got %q", s)
	}
	return d, nil
}

func durations(v *yaml.Node) ([]time.Duration, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("want a list of durations such as [5s, 20s]")
	}
	if len(v.Content) > MaxListLen {
		return nil, fmt.Errorf("%d entries, more than the limit %d", len(v.Content), MaxListLen)
	}
	out := make([]time.Duration, len(v.Content))
	for i, n := range v.Content {
		d, err := duration(n)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		out[i] = d
	}
	return out, nil
}

// parseDist reads {fixed: D}, {uniform: [LO, HI]}, {lognormal: {median:
// D, p99: D}} or {empirical: [D, ...]}.
func parseDist(v *yaml.Node) (*Dist, error) {
	if v.Kind != yaml.MappingNode || len(v.Content) != 2 {
		return nil, fmt.Errorf("want one of {fixed: 5ms}, {uniform: [1ms, 5ms]}, {lognormal: {median: 2ms, p99: 50ms}}, {empirical: [1ms, 2ms, 40ms]}")
	}
	d := &Dist{}
	name, body := v.Content[0].Value, v.Content[1]
	var err error
	switch name {
	case "fixed":
		d.Fixed, err = duration(body)
	case "uniform":
		var xs []time.Duration
		if xs, err = durations(body); err == nil && len(xs) != 2 {
			err = fmt.Errorf("want [low, high]")
		}
		if err == nil {
			d.Uniform = &[2]time.Duration{xs[0], xs[1]}
		}
	case "lognormal":
		var se *ScheduleError
		if errors.As(onlyKeys(body, "lognormal", "median", "p99"), &se) {
			return nil, errors.New(se.Msg)
		}
		d.LogNormal = &LogNormal{}
		if d.LogNormal.Median, err = optionalDuration(body, "median"); err == nil {
			d.LogNormal.P99, err = optionalDuration(body, "p99")
		}
	case "empirical":
		d.Empirical, err = durations(body)
		if err == nil && len(d.Empirical) == 0 {
			err = fmt.Errorf("want at least one sample")
		}
	default:
		return nil, fmt.Errorf("%q: want fixed, uniform, lognormal or empirical", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return d, d.check()
}

func optionalDuration(m *yaml.Node, key string) (time.Duration, error) {
	v := mapValue(m, key)
	if v == nil {
		return 0, fmt.Errorf("want %s", key)
	}
	d, err := duration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return d, nil
}

// onlyKeys refuses a mapping key not in keys and a node that is not a
// mapping; the error is a *ScheduleError naming the line.
func onlyKeys(n *yaml.Node, what string, keys ...string) error {
	if n.Kind != yaml.MappingNode {
		return &ScheduleError{Line: n.Line, Msg: what + ": want a mapping"}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		known := false
		for _, want := range keys {
			known = known || k.Value == want
		}
		if !known {
			return &ScheduleError{Line: k.Line, Msg: fmt.Sprintf("%s: unknown key %q (known: %s)", what, k.Value, strings.Join(keys, ", "))}
		}
		if seen[k.Value] {
			return &ScheduleError{Line: k.Line, Msg: fmt.Sprintf("%s: key %q given twice", what, k.Value)}
		}
		seen[k.Value] = true
	}
	return nil
}

// mapValue is the value of key in mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
