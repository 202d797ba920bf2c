package tfrecord_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/tensor"
)

// FuzzExample frames the fuzzer's bytes as records with their checksums
// right, so that every input reaches the Example's parser, by a given spec
// and by an inferred one.
func FuzzExample(f *testing.F) {
	var x tfrecord.Example
	x.Bytes("image/encoded", []byte("jpeg"))
	x.Int64("label", 3)
	x.Float("pair", 1, 2)
	x.Int64("tokens", 1, 2, 3)
	f.Add(x.Marshal())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		var b bytes.Buffer
		w := tfrecord.NewWriter(&b)
		for range 2 {
			if err := w.Write(msg); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []string{spec, ""} {
			e := examples(t, b.Bytes(), s)
			for range 2 {
				slots, err := e.Next()
				if err != nil && !errors.Is(err, format.ErrCorrupt) {
					t.Fatalf("not classed as damage: %v", err)
				}
				checkBounded(t, slots, len(msg))
			}
			if _, err := e.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after 2 records: %v", err)
			}
		}
		// Parsed as views (twice: the second over the first's storage),
		// the same slots or the same error.
		if sp, err := tfrecord.ParseSpec(spec); err == nil {
			p, views := tfrecord.NewParser(sp), tfrecord.NewParser(sp)
			for range 2 {
				want, werr := p.Parse(msg)
				got, err := views.ParseViews(msg)
				if (werr == nil) != (err == nil) || werr != nil && werr.Error() != err.Error() || werr == nil && !want.Equal(got) {
					t.Fatalf("Parse gives %v (%v), ParseViews %v (%v)", want, werr, got, err)
				}
			}
		}
	})
}

// FuzzRecords reads the fuzzer's bytes as a file: damage to the framing
// stops the reader; nothing panics or reads past what is there.
func FuzzRecords(f *testing.F) {
	f.Add(file(f, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		e := examples(t, data, spec)
		for range 1000 {
			slots, err := e.Next()
			if errors.Is(err, io.EOF) || e.Broken() {
				return
			}
			if err != nil && !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("not classed as damage: %v", err)
			}
			checkBounded(t, slots, len(data))
		}
	})
}

// checkBounded fails when a slot holds more than a record of n bytes can
// say: 8 bytes (an int64) for each byte of a varint at most.
func checkBounded(t *testing.T, slots tensor.Slots, n int) {
	t.Helper()
	for _, s := range slots {
		if len(s.Bytes()) > 8*n {
			t.Fatalf("a slot of %d bytes from a record of %d", len(s.Bytes()), n)
		}
	}
}
