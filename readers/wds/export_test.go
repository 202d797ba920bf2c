package wds

import "bytes"

// ScanOnly scans b's headers without falling back on archive/tar; an
// error wrapping ErrIrregular where it would.
func ScanOnly(b []byte) (*Spans, error) {
	s := scanner{src: bytes.NewReader(b), size: int64(len(b))}
	return s.spans()
}

var ErrIrregular = errIrregular

// Field makes a field's tensor by its extension, as the readers do.
var Field = field

// Split is a member's key and extension.
var Split = split
