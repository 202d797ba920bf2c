// Package yamlline places a YAML syntax error on the line where the text
// goes wrong. The YAML library reports such an error at the line of the
// construct it was parsing (a sequence or mapping that began lines
// before): an indentation error on line 4 of a spec was reported at line
// 1. The line is found as the shortest run of whole lines from the start
// that fails to parse, by bisection: a few parses of the text, whatever
// its length.
package yamlline

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var lineRE = regexp.MustCompile(`^line (\d+): `)

// Locate returns the line (from 1; 0 when the error names none) of err,
// the error parsing data gave, and its message without the library's
// "yaml: line N: " prefix. A type error (a value of the wrong type) keeps
// its line: that one is right.
func Locate(data []byte, err error) (int, string) {
	msg := err.Error()
	if te, ok := errors.AsType[*yaml.TypeError](err); ok && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, msg
	}
	line, _ := strconv.Atoi(m[1])
	msg = strings.TrimPrefix(msg, m[0])
	if _, ok := err.(*yaml.TypeError); ok {
		return line, msg
	}
	return syntaxLine(data, line), msg
}

// syntaxLine is the first line at which data's lines from the start stop
// parsing, at or after from (the library's line); from itself when that
// cannot be told (the whole text parses, say).
func syntaxLine(data []byte, from int) int {
	ends := lineEnds(data)
	if from < 1 || from > len(ends) || parses(data) || !parses(data[:ends[from-1]]) {
		return from
	}
	lo, hi := from, len(ends) // lines 1..lo parse, lines 1..hi do not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if parses(data[:ends[mid-1]]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// lineEnds is the offset after each line of data.
func lineEnds(data []byte) []int {
	var ends []int
	for at := 0; at < len(data); {
		n := bytes.IndexByte(data[at:], '\n')
		if n < 0 {
			at = len(data)
		} else {
			at += n + 1
		}
		ends = append(ends, at)
	}
	return ends
}

// parses reports whether text is well-formed YAML (its types aside).
func parses(text []byte) bool {
	var n yaml.Node
	return yaml.Unmarshal(text, &n) == nil
}
