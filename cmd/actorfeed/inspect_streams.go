package main

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/readers/wds"
)

// maxDamageLines bounds the damaged samples or records inspect lists; the
// count covers them all.
const maxDamageLines = 10

// streamFile is a shard or record file opened for inspect: its size, and
// whether it is gzip'd (by its first two bytes, as the readers tell).
type streamFile struct {
	f       *os.File
	size    int64
	gzipped bool
}

func openStreamFile(path string) (*streamFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	var magic [2]byte
	n, _ := f.ReadAt(magic[:], 0)
	return &streamFile{f: f, size: st.Size(), gzipped: n == 2 && magic == [2]byte{0x1f, 0x8b}}, nil
}

// from is the file's content from its start, decompressed when gzip'd.
func (s *streamFile) from(formatName, path string) (io.Reader, error) {
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	r := io.Reader(bufio.NewReaderSize(s.f, 64<<10))
	if s.gzipped {
		return format.GzipReader(r, formatName, path)
	}
	return r, nil
}

func (s *streamFile) describe(formatName string) string {
	if s.gzipped {
		return fmt.Sprintf("%s, %d bytes, gzip'd", formatName, s.size)
	}
	return fmt.Sprintf("%s, %d bytes", formatName, s.size)
}

// damageList collects a file's damaged samples or records: the first
// maxDamageLines are printed, all are counted.
type damageList struct {
	out   io.Writer
	first error
	n     int
}

func (d *damageList) add(err error) {
	if d.n == 0 {
		d.first = err
	}
	if d.n++; d.n <= maxDamageLines {
		fmt.Fprintf(d.out, "damaged: %v\n", cause(err))
	}
}

// inspectWDS lists a WebDataset shard: its tar members, then its samples
// as run reads them (keys, fields, each sample's data decoded), and the
// damage found, if any.
func inspectWDS(ctx context.Context, out io.Writer, path string) error {
	s, err := openStreamFile(path)
	if err != nil {
		return err
	}
	defer s.f.Close()
	fmt.Fprintf(out, "file:    %s\nformat:  %s\n", path, s.describe("wds"))
	r, err := s.from("wds", path)
	if err != nil {
		return err
	}
	members, bytes, terr := tarMembers(ctx, r)
	fmt.Fprintf(out, "members: %d files, %d bytes of data\n", members, bytes)
	if r, err = s.from("wds", path); err != nil {
		return err
	}
	wr := wds.NewReader(r, path)
	d := &damageList{out: out}
	samples, first, last := 0, "", ""
	for {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		key, _, err := wr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.add(err)
			if wr.Broken() {
				break
			}
			continue
		}
		if samples++; first == "" {
			first = key
		}
		last = key
	}
	if fields := wr.Fields(); len(fields) > 0 {
		fmt.Fprintf(out, "samples: %d whole, fields %s (the first sample's)\n", samples, strings.Join(fields, ", "))
	} else {
		fmt.Fprintf(out, "samples: %d whole\n", samples)
	}
	if first != "" {
		fmt.Fprintf(out, "keys:    %s to %s\n", first, last)
	}
	if d.n > 0 {
		return fmt.Errorf("%d samples are damaged; the first: %w", d.n, d.first)
	}
	if terr != nil {
		return fmt.Errorf("%s: %w", path, terr)
	}
	fmt.Fprintln(out, "verdict: every member read, every sample's fields decoded")
	return nil
}

// tarMembers counts the files of a tar stream and their bytes, as Go's
// archive/tar reads it.
func tarMembers(ctx context.Context, r io.Reader) (files int, bytes int64, err error) {
	tr := tar.NewReader(r)
	for {
		if err := context.Cause(ctx); err != nil {
			return files, bytes, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, bytes, nil
		}
		if err != nil {
			return files, bytes, err
		}
		if h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeGNUSparse {
			files, bytes = files+1, bytes+h.Size
		}
	}
}

// inspectTFRecord checks every record of a TFRecord file, both its CRCs
// (of the length and of the data) and its tf.train.Example as run parses
// it, and lists the features of the first record.
func inspectTFRecord(ctx context.Context, out io.Writer, path, params string) error {
	s, err := openStreamFile(path)
	if err != nil {
		return err
	}
	defer s.f.Close()
	fmt.Fprintf(out, "file:     %s\nformat:   %s\n", path, s.describe("tfrecord"))
	r, err := s.from("tfrecord", path)
	if err != nil {
		return err
	}
	var p *tfrecord.Parser
	if params != "" {
		spec, err := tfrecord.ParseSpec(params)
		if err != nil {
			return usageError{fmt.Errorf("%s: %w", path, err)}
		}
		p = tfrecord.NewParser(spec)
	}
	tr := tfrecord.NewReader(r, path)
	d := &damageList{out: out}
	records, bytes := 0, int64(0)
	for {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		data, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.add(err)
			if tr.Broken() { // the framing: nothing after it can be read
				break
			}
			continue
		}
		if err := parseExample(&p, data); err != nil {
			d.add(tr.Fail(err))
			continue
		}
		records, bytes = records+1, bytes+int64(len(data))
	}
	fmt.Fprintf(out, "records:  %d whole, %d bytes of data\n", records, bytes)
	if p != nil {
		fmt.Fprintf(out, "features: %s\n", p.Spec())
	}
	if d.n > 0 {
		return fmt.Errorf("%d records are damaged; the first: %w", d.n, d.first)
	}
	fmt.Fprintln(out, "verdict:  every record's length and data CRC-32C match, every Example parses")
	return nil
}

// parseExample parses a record's tf.train.Example with *p, made from the
// first record's features when no spec was given.
func parseExample(p **tfrecord.Parser, data []byte) error {
	if *p == nil {
		spec, err := tfrecord.Infer(data)
		if err != nil {
			return err
		}
		*p = tfrecord.NewParser(spec)
	}
	_, err := (*p).Parse(data)
	return err
}
