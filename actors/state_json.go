package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/actorfeed/actorfeed/messages"
)

// stateRanges are the ranges of a state's numeric fields, by their JSON
// names, as Check checks them; DecodeState names them when a number does
// not even fit its field. docs/determinism.md ("The state") lists them.
var stateRanges = map[string]string{
	"version":          fmt.Sprintf("%d, the version this build reads", StateVersion),
	"seed":             "from 0 to 2^64-1",
	"window":           fmt.Sprintf("from 0 to %d", MaxWindow),
	"unit":             fmt.Sprintf("from 1 to %d", MaxBatch),
	"data.files":       fmt.Sprintf("from 1 to %d", messages.MaxFiles),
	"data.records":     "from 0 to 2^64-1, the layout's ranges within it",
	"data.splits":      "from 0 to data.records (an empty file has none)",
	"epoch":            fmt.Sprintf("from 0 to %d", MaxEpoch),
	"layout.world":     fmt.Sprintf("from 1 to %d", MaxWorld),
	"layout.ranges.lo": "below its hi, at or past the last range's hi",
	"layout.ranges.hi": "at most data.records",
	"rank":             "from 0 to layout.world-1",
	"done":             "from 0 to the share, where an item ends",
	"beyond":           "past done, increasing, starts of items",
	"blend.samples":    fmt.Sprintf("from 1 to %d, the layout's ranges within it", uint64(messages.MaxRecords)),
}

// DecodeState reads a state saved as JSON (json.Marshal of a State) and
// checks it (State.Check): a field of the wrong kind, a number its field
// cannot hold, or one outside its range, is refused with an error naming
// the field and its range, wrapping ErrState.
func DecodeState(b []byte) (State, error) {
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrState, jsonFieldError(err))
	}
	if st.Version == 0 {
		return State{}, fmt.Errorf("%w: it has no version: not a state", ErrState)
	}
	if err := st.Check(); err != nil {
		return State{}, err
	}
	return st, nil
}

// DecodeStates reads a JSON list of states, each checked as DecodeState
// does; a refusal is a *StateError naming the state by its index.
func DecodeStates(b []byte) ([]State, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: want a JSON list of states: %w", ErrState, err)
	}
	states := make([]State, len(raw))
	for i, r := range raw {
		st, err := DecodeState(r)
		if err != nil {
			return nil, &StateError{Index: i, Err: fmt.Errorf("state %d: %w", i, err)}
		}
		states[i] = st
	}
	return states, nil
}

// Check says which field of st is out of its range (stateRanges), or
// does not agree with the others, wrapping ErrState; Rejoin and
// Options.Resume check every state so before anything else. It checks
// only the state itself: whether it resumes a pipeline's data and order
// is Options.Resume's to say.
func (st State) Check() error {
	if err := checkState(&st); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	return nil
}

// jsonFieldError names the field and its range where a JSON value does
// not fit its field.
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" {
		return fmt.Errorf("not a state: %w", err)
	}
	field := te.Field
	if i := strings.IndexByte(field, '['); i >= 0 { // a list's element
		field = field[:i]
	}
	if r, ok := stateRanges[field]; ok {
		return fmt.Errorf("%s: %s does not fit: it must be %s", te.Field, te.Value, r)
	}
	return fmt.Errorf("%s: %s is not a %s", te.Field, te.Value, te.Type)
}
