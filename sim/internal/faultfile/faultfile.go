// Package faultfile is a file opened through injected faults, as
// readers.OpenStream and RecordFile read a file: sim's schedules and
// sim/scenario's disks both read through it, and no one else.
package faultfile

import (
	"io"
	"os"
)

// Source reads f through r, a ReaderAt that injects faults, size bytes.
type Source struct {
	*io.SectionReader
	f *os.File
}

// New is a Source of size bytes read through r; closing it closes f.
func New(r io.ReaderAt, size int64, f *os.File) Source {
	return Source{io.NewSectionReader(r, 0, size), f}
}

// Close closes the file.
func (s Source) Close() error { return s.f.Close() }
