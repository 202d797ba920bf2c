package recordio_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/actorfeed/actorfeed/readers/recordio"
)

// benchFile writes 64 MiB of 784-byte records once per run.
func benchFile(b *testing.B, c recordio.Compressor) (string, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.recordio")
	rec := make([]byte, 784)
	for i := range rec {
		rec[i] = byte(i * 7)
	}
	n := (64 << 20) / len(rec)
	records := make([][]byte, n)
	for i := range records {
		records[i] = rec
	}
	writeFile(b, path, records, recordio.WriterOptions{Compressor: c})
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	// Warm the page cache.
	if _, err := os.ReadFile(path); err != nil {
		b.Fatal(err)
	}
	return path, st.Size()
}

// BenchmarkScan compares a full verified scan of an uncompressed file from
// the page cache with a plain read of the same bytes, in one run: the ratio
// of their MB/s is the figure of merit (goal >= 0.5).
func BenchmarkScan(b *testing.B) {
	path, size := benchFile(b, recordio.NoCompression)
	b.Run("plain-read", func(b *testing.B) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, recordio.DefaultMaxChunkBytes)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			for {
				_, err := f.Read(buf)
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, c := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy} {
		p, sz := path, size
		if c != recordio.NoCompression {
			p, _ = benchFile(b, c)
		}
		b.Run("scan-"+c.String(), func(b *testing.B) {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			b.SetBytes(size) // same logical bytes as the plain read
			b.ReportAllocs()
			// One scanner, one pass per iteration: as a multi-pass reader
			// uses it (RecordFile.Reset).
			s := recordio.NewScanner(f, st.Size(), recordio.ScannerOptions{})
			for b.Loop() {
				s.Reset(recordio.ChunkInfo{})
				n := 0
				for s.Scan() {
					n += len(s.Record())
				}
				if s.Err() != nil {
					b.Fatal(s.Err())
				}
			}
			_ = sz
		})
	}
}
