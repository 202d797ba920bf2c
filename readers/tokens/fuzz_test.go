package tokens_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tokens"
)

// FuzzIndexed opens any .idx beside a .bin of any size: it is refused
// with a corruption error naming the .idx, or every sequence it declares
// lies inside the .bin and reads; never a panic or an allocation sized by
// an unchecked count.
func FuzzIndexed(f *testing.F) {
	good, binSize := idxOf(3, 5, 0, 4)
	f.Add(good, uint16(binSize))
	f.Add(good[:40], uint16(binSize))
	f.Add(append(good, 0, 0, 0, 0), uint16(binSize))
	f.Fuzz(func(t *testing.T, idx []byte, binSize uint16) {
		prefix := filepath.Join(t.TempDir(), "d")
		if err := os.WriteFile(prefix+".idx", idx, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prefix+".bin", make([]byte, binSize), 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := tokens.OpenIndexed(prefix)
		if err != nil {
			var fe *format.Error
			if !errors.As(err, &fe) || fe.File != prefix+".idx" && fe.File != prefix+".bin" {
				t.Fatalf("an error that does not name the files: %v", err)
			}
			return
		}
		defer x.Close()
		var sum uint64
		for s := range x.Sequences() {
			start, n, err := x.Sequence(s)
			if err != nil || start != sum {
				t.Fatalf("sequence %d at %d (%v), want %d", s, start, err, sum)
			}
			sum += n
		}
		if sum != x.Tokens() || sum*uint64(x.Element().Size) != uint64(binSize) {
			t.Fatalf("%d tokens of %s in %d sequences, in a .bin of %d bytes", x.Tokens(), x.Element().Name, x.Sequences(), binSize)
		}
		if n := tokens.Samples(x, 2); n > 0 {
			toks, pos := make([]int64, 3), make([]int64, 3)
			if _, err := tokens.Sample(x, n-1, toks, pos, nil); err != nil && !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("the last sample: %v", err)
			}
		}
	})
}

// FuzzLLMC opens any file as an llm.c token file: refused by name, or its
// tokens are what the file holds after the header.
func FuzzLLMC(f *testing.F) {
	f.Add(make([]byte, 1024), int32(20240520), int32(1), int32(0))
	f.Add(make([]byte, 1030), int32(20240801), int32(7), int32(1))
	f.Fuzz(func(t *testing.T, file []byte, magic, version, count int32) {
		if len(file) >= 12 {
			for i, v := range []int32{magic, version, count} {
				file[4*i], file[4*i+1], file[4*i+2], file[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			}
		}
		path := filepath.Join(t.TempDir(), "train.bin")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := tokens.OpenLLMC(path)
		if err != nil {
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("not a corruption error: %v", err)
			}
			return
		}
		defer l.Close()
		if want := uint64(len(file)-1024) / uint64(l.Element().Size); l.Tokens() != want {
			t.Fatalf("%d tokens in %d bytes", l.Tokens(), len(file))
		}
		dst := make([]int64, min(l.Tokens(), 4096))
		if err := l.ReadTokens(dst, 0); err != nil {
			t.Fatal(err)
		}
	})
}
