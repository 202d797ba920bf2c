package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/actorfeed/actorfeed/program"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
)

// entriesValue is --data: entries given one a flag or separated by commas,
// a comma inside a format's parameters, a shape's brackets or braces
// ("tfrecord(image=bytes,box=float[2,2]):a.tfrecord", "{a,b}.tar") being
// part of the entry. pflag's string slices split on every comma.
type entriesValue struct{ list *[]string }

func (v entriesValue) Set(s string) error {
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				*v.list = append(*v.list, s[start:i])
				start = i + 1
			}
		}
	}
	*v.list = append(*v.list, s[start:])
	return nil
}

func (v entriesValue) String() string { return strings.Join(*v.list, ",") }

func (v entriesValue) Type() string { return "entries" }

// withFeatures reads every TFRecord entry that names no features by spec
// (--features).
func withFeatures(entries []string, spec string) ([]string, error) {
	if spec == "" {
		return entries, nil
	}
	if _, err := tfrecord.ParseSpec(spec); err != nil {
		return nil, usageError{fmt.Errorf("--features %q: %w", spec, err)}
	}
	out, any := make([]string, len(entries)), false
	for i, e := range entries {
		out[i] = e
		name, path, err := readers.ParseEntry(e)
		if err != nil || !strings.HasPrefix(name, "tfrecord") {
			continue
		}
		if name != "tfrecord" {
			return nil, usageError{fmt.Errorf("--features and %q: the entry names its own features; give them once", e)}
		}
		out[i], any = "tfrecord("+spec+"):"+path, true
	}
	if !any {
		return nil, usageError{fmt.Errorf("--features %q: --data holds no TFRecord file: the features are a TFRecord file's", spec)}
	}
	return out, nil
}

// shuffleValue is --shuffle: a window of records; "all", the global
// order; or "auto", the global order where every file is read by position
// and a window of program.AutoWindow records where one is not (the Python
// loader's shuffle=True).
type shuffleValue struct {
	window   *int
	global   *bool
	orWindow *int
}

func (v shuffleValue) Set(s string) error {
	switch s {
	case "all":
		*v.window, *v.global, *v.orWindow = 0, true, 0
		return nil
	case "auto":
		*v.window, *v.global, *v.orWindow = 0, true, program.AutoWindow
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a window of records (an integer), all or auto")
	}
	*v.window, *v.global, *v.orWindow = n, false, 0
	return nil
}

func (v shuffleValue) String() string {
	switch {
	case v.global != nil && *v.global && v.orWindow != nil && *v.orWindow > 0:
		return "auto"
	case v.global != nil && *v.global:
		return "all"
	case v.window == nil:
		return "0"
	}
	return strconv.Itoa(*v.window)
}

func (v shuffleValue) Type() string { return "window|all|auto" }
