package format

import "io"

// ErrWriter keeps the first error of the writer it wraps, so that a
// decoder writing through it can tell the writer's failure (a full disk)
// from damage to what it reads, which a TeeReader would report alike.
type ErrWriter struct {
	W   io.Writer
	Err error
}

func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return 0, e.Err
	}
	n, err := e.W.Write(p)
	e.Err = err
	return n, err
}
