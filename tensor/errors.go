package tensor

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them, so
// callers can classify failures with errors.Is.
var (
	// ErrDType is returned for an unknown or mismatched element type.
	ErrDType = errors.New("tensor: bad dtype")
	// ErrShape is returned when a shape is malformed or does not match the
	// data, a declared shape or the other instances of a batch.
	ErrShape = errors.New("tensor: bad shape")
	// ErrLoD is returned when LoD offsets break the rules of Validate.
	ErrLoD = errors.New("tensor: invalid LoD")
	// ErrMalformed is returned by Decode for bytes that are not a valid
	// encoding: bad magic, unknown version, inconsistent sizes, truncation.
	ErrMalformed = errors.New("tensor: malformed encoding")
)
