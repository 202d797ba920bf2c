package readers

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// maxBraceExpansions bounds what one entry's braces expand to: a million
// paths is well past any data set's shards. maxBracedBytes bounds an
// entry with braces (Linux's PATH_MAX), and so the work its nesting costs
// and the bytes its paths take.
const (
	maxBraceExpansions = 1 << 20
	maxBracedBytes     = 4096
	maxExpandedBytes   = 64 << 20 // all the paths of one entry
)

// errBraces is a brace notation that does not expand: a malformed entry.
var errBraces = fmt.Errorf("%w: bad braces", ErrBadEntry)

// braceRange is a brace's numeric range, "{000..099}" or "{0..100..10}".
var braceRange = regexp.MustCompile(`^(-?\d+)\.\.(-?\d+)(?:\.\.(\d+))?$`)

// expandBraces expands the brace notation of WebDataset's shard lists
// (Python's braceexpand, as bash's): "{a,b}" gives a then b, "{0..9}" the
// numbers 0 to 9 (descending too, by a step after a second ".."), each as
// wide as the wider end when an end has a leading zero. Braces nest and
// follow one another; one with neither a comma nor a range is kept as it
// is. A string without braces is itself.
func expandBraces(s string) ([]string, error) {
	open, end, err := firstBrace(s)
	if err != nil || open < 0 {
		return []string{s}, err
	}
	if len(s) > maxBracedBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than a path may be (%d)", errBraces, len(s), maxBracedBytes)
	}
	alts, err := braceAlternatives(s[open+1 : end])
	if err != nil {
		return nil, err
	}
	rest, err := expandBraces(s[end+1:])
	if err != nil {
		return nil, err
	}
	if len(alts)*len(rest) > maxBraceExpansions {
		return nil, fmt.Errorf("%w: more than %d paths", errBraces, maxBraceExpansions)
	}
	if n := expandedBytes(open, alts, rest); n > maxExpandedBytes {
		return nil, fmt.Errorf("%w: paths of %d bytes in all, more than %d", errBraces, n, maxExpandedBytes)
	}
	out := make([]string, 0, len(alts)*len(rest))
	for _, a := range alts {
		for _, r := range rest {
			out = append(out, s[:open]+a+r)
		}
	}
	return out, nil
}

// expandedBytes is the bytes of the paths a prefix of n bytes, one of alts
// and one of rest make, all of them.
func expandedBytes(n int, alts, rest []string) int {
	sum := func(xs []string) (t int) {
		for _, x := range xs {
			t += len(x)
		}
		return t
	}
	return len(alts)*len(rest)*n + sum(alts)*len(rest) + sum(rest)*len(alts)
}

// firstBrace finds the first "{" and the "}" that closes it, -1 without
// braces; a brace left open or closed without opening is an error.
func firstBrace(s string) (open, end int, err error) {
	depth, open := 0, -1
	for i, c := range s {
		switch c {
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth--; depth < 0 {
				return -1, -1, fmt.Errorf("%w: it closes a brace at byte %d that it did not open", errBraces, i)
			}
			if depth == 0 {
				return open, i, nil
			}
		}
	}
	if depth > 0 {
		return -1, -1, fmt.Errorf("%w: it leaves the brace at byte %d open", errBraces, open)
	}
	return -1, -1, nil
}

// braceAlternatives are what a brace's body stands for, expanded: its
// comma-separated parts (commas in nested braces left alone), its range's
// numbers, or itself in braces.
func braceAlternatives(body string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i, c := range body {
		switch c {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				parts, start = append(parts, body[start:i]), i+1
			}
		}
	}
	if m := braceRange.FindStringSubmatch(body); parts == nil && m != nil {
		return numberRange(body, m[1], m[2], m[3])
	}
	literal := parts == nil
	var out []string
	for _, part := range append(parts, body[start:]) {
		each, err := expandBraces(part)
		if err != nil {
			return nil, err
		}
		if len(out)+len(each) > maxBraceExpansions {
			return nil, fmt.Errorf("%w: {%s} gives more than %d paths", errBraces, body, maxBraceExpansions)
		}
		for _, e := range each {
			if literal {
				e = "{" + e + "}"
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// numberRange is the numbers from first to last by step (1 if empty).
func numberRange(body, first, last, step string) ([]string, error) {
	a, errA := strconv.ParseInt(first, 10, 64)
	b, errB := strconv.ParseInt(last, 10, 64)
	by, errS := int64(1), error(nil)
	if step != "" {
		by, errS = strconv.ParseInt(step, 10, 64)
	}
	if err := errors.Join(errA, errB, errS); err != nil || by <= 0 {
		return nil, fmt.Errorf("%w: {%s}: want {first..last} or {first..last..step}, integers, the step above 0", errBraces, body)
	}
	// In uint64, so that no range between int64's ends overflows: every
	// number made lies between them.
	span := uint64(max(a, b)) - uint64(min(a, b))
	if span/uint64(by) >= maxBraceExpansions {
		return nil, fmt.Errorf("%w: {%s} gives more than %d paths", errBraces, body, maxBraceExpansions)
	}
	width := 0
	if zeroPadded(first) || zeroPadded(last) {
		width = max(len(first), len(last))
	}
	var out []string
	for i := range span/uint64(by) + 1 {
		n := int64(uint64(a) + i*uint64(by))
		if a > b {
			n = int64(uint64(a) - i*uint64(by))
		}
		out = append(out, fmt.Sprintf("%0*d", width, n))
	}
	return out, nil
}

// zeroPadded says whether a range's end has a leading zero ("007").
func zeroPadded(n string) bool {
	n = strings.TrimPrefix(n, "-")
	return len(n) > 1 && n[0] == '0'
}
