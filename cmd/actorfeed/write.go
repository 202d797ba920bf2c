package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/actorfeed/actorfeed/readers/objstore"
)

// uploader puts write's shards in an object store, one at a time as each
// is completed: a shard is written whole to a temporary directory, then
// uploaded (an object appears whole or not at all) and removed there.
type uploader struct {
	dir, prefix string
	store       *objstore.Store
	ctx         context.Context
}

func newUploader(ctx context.Context, out string) (*uploader, error) {
	u, err := objstore.ParseURL(out)
	if err != nil {
		return nil, usageError{fmt.Errorf("--out: %w", err)}
	}
	if u.Key != "" && !strings.HasSuffix(u.Key, "/") {
		u.Key += "/"
	}
	s, err := objstore.Default(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "actorfeed-write-")
	if err != nil {
		return nil, err
	}
	return &uploader{dir: dir, prefix: u.String(), store: s, ctx: ctx}, nil
}

func (u *uploader) upload(local string) (string, error) {
	url := u.prefix + filepath.Base(local)
	if err := u.store.Upload(u.ctx, url, local); err != nil {
		return "", err
	}
	return url, os.Remove(local)
}

func (u *uploader) close() { os.RemoveAll(u.dir) }

// writeHelp is the write command's long help.
const writeHelp = `Writes the samples read from stdin as shards in the directory --out:
WebDataset shards (--to wds, PREFIX-NNNNNN.tar), TFRecord files of
tf.train.Example records (--to tfrecord) or RecordIO files of tensor
records (--to recordio). A new shard is begun when the one being written
holds --max-samples samples or --max-bytes bytes (as the webdataset
library's ShardWriter does, so a shard exceeds --max-bytes by at most its
last sample). Every shard appears complete or not at all: a temporary
file renamed or, with --out s3://bucket/prefix, an object uploaded as
soon as its shard is completed. Stdin that ends
without its end line (the writer was stopped) leaves the shards completed
before it and nothing of the one in progress. Each completed shard is a
JSON line on stdout. The Python package's actorfeed.ShardWriter writes the
input (docs/python.md, "Writing data"): per sample a JSON line
{"key": K, "fields": [{"name", "kind", "len", "dtype", "shape"}]} and then
the fields' bytes, and {"end": true} after the last.`

// writeOptions are write's flags.
type writeOptions struct {
	to, out, prefix string
	maxSamples      int
	maxBytes        int64
}

// Bounds on write's input: a sample's header line, a field, a sample.
const (
	maxHeaderBytes   = 1 << 20
	maxFieldBytes    = 256 << 20
	maxWrittenSample = 1 << 30
	maxFields        = 4096
)

func newWrite() *cobra.Command {
	o := writeOptions{}
	cmd := &cobra.Command{
		Use:   "write --to wds|tfrecord|recordio --out DIR < samples",
		Short: "Write samples from stdin as WebDataset, TFRecord or RecordIO shards (python/, actorfeed.ShardWriter)",
		Long:  writeHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return usageError{err}
			}
			return runWrite(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.to, "to", "wds", "the shards' format: wds, tfrecord or recordio")
	f.StringVar(&o.out, "out", "", "the directory the shards are written to (made if absent), or s3://bucket/prefix: each shard is uploaded as it is completed")
	f.StringVar(&o.prefix, "prefix", "shard", "the shards' names: PREFIX-000000.tar, ...")
	f.IntVar(&o.maxSamples, "max-samples", 100000, "samples a shard holds at most")
	f.Int64Var(&o.maxBytes, "max-bytes", 3<<30, "bytes after which a shard takes no more samples")
	return cmd
}

func (o *writeOptions) check() error {
	if o.out == "" {
		return errors.New("give the directory to write to with --out")
	}
	if _, ok := sampleFormats[o.to]; !ok {
		return fmt.Errorf("--to %q: want wds, tfrecord or recordio", o.to)
	}
	if o.prefix == "" || filepath.Base(o.prefix) != o.prefix || o.prefix[0] == '.' {
		return fmt.Errorf("--prefix %q: want a file name without a directory, not starting with '.'", o.prefix)
	}
	return checkInts(intFlag{"--max-samples", o.maxSamples, 1, maxShardSamples},
		intFlag{"--max-bytes", int(min(o.maxBytes, 1<<40)), 1 << 10, 1 << 40})
}

// inputSample is one sample of write's input.
type inputSample struct {
	Key    string       `json:"key"`
	Fields []inputField `json:"fields"`
	End    bool         `json:"end"`
}

// inputField is one field: its name, its kind (bytes, int64, float or
// array) and its bytes; an array's dtype and shape.
type inputField struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Len   int64  `json:"len"`
	DType string `json:"dtype,omitempty"`
	Shape []int  `json:"shape,omitempty"`
	data  []byte
}

// runWrite writes the samples of in as shards, saying each on out.
func runWrite(ctx context.Context, in io.Reader, out io.Writer, o writeOptions) error {
	sf := sampleFormats[o.to]
	w := &shardSeq{dir: o.out, prefix: o.prefix, format: sf, maxSamples: o.maxSamples, maxBytes: o.maxBytes, out: out}
	if objstore.IsURL(o.out) {
		up, err := newUploader(ctx, o.out)
		if err != nil {
			return err
		}
		defer up.close()
		w.dir, w.upload = up.dir, up.upload
	}
	defer w.abort()
	br := bufio.NewReaderSize(in, 1<<20)
	for n := 0; ; n++ {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		s, err := readSample(br, n)
		if err != nil {
			return err
		}
		if s.End {
			return w.finish()
		}
		if err := w.add(s); err != nil {
			return fmt.Errorf("sample %d (key %q): %w", n, s.Key, err)
		}
	}
}

// readSample reads sample n of the input: its header line and its fields.
func readSample(br *bufio.Reader, n int) (inputSample, error) {
	var s inputSample
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, io.EOF) && len(line) == 0:
		return s, fmt.Errorf("the input ended before its end line, at sample %d: the writer was stopped; the shard in progress is not written", n)
	case errors.Is(err, bufio.ErrBufferFull):
		return s, fmt.Errorf("sample %d: a header line longer than %d bytes", n, maxHeaderBytes)
	case err != nil:
		return s, fmt.Errorf("sample %d: %w", n, err)
	}
	if err := json.Unmarshal(bytes.TrimSpace(line), &s); err != nil {
		return s, fmt.Errorf("sample %d: its header line: %w", n, err)
	}
	if s.End {
		return s, nil
	}
	if len(s.Fields) == 0 || len(s.Fields) > maxFields {
		return s, fmt.Errorf("sample %d: %d fields: want 1 to %d", n, len(s.Fields), maxFields)
	}
	var total int64
	for i := range s.Fields {
		f := &s.Fields[i]
		if f.Len < 0 || f.Len > maxFieldBytes {
			return s, fmt.Errorf("sample %d: field %q of %d bytes: want 0 to %d", n, f.Name, f.Len, maxFieldBytes)
		}
		if total += f.Len; total > maxWrittenSample {
			return s, fmt.Errorf("sample %d: more than %d bytes", n, maxWrittenSample)
		}
		// The buffer grows as the bytes arrive: a length the input does
		// not hold costs no more than the bytes there are.
		var b bytes.Buffer
		if got, err := b.ReadFrom(io.LimitReader(br, f.Len)); err != nil || got < f.Len {
			return s, fmt.Errorf("sample %d: field %q: the input ended within its %d bytes: the writer was stopped", n, f.Name, f.Len)
		}
		f.data = b.Bytes()
	}
	return s, nil
}

// shardSeq is the shards being written: the one in progress, and how
// many were completed.
type shardSeq struct {
	dir, prefix string
	format      sampleFormat
	maxSamples  int
	maxBytes    int64
	out         io.Writer

	// upload, for shards written to an object store, puts a completed
	// shard there and removes it here, returning its URL.
	upload func(local string) (string, error)

	cur         sampleShard
	done, total int
	samples     int
	path        string
}

// add adds a sample to the shard in progress, completing it first when
// it holds maxSamples samples or maxBytes bytes.
func (w *shardSeq) add(s inputSample) error {
	if w.cur != nil && (w.samples >= w.maxSamples || w.cur.size() >= w.maxBytes) {
		if err := w.complete(); err != nil {
			return err
		}
	}
	if w.cur == nil {
		w.path = filepath.Join(w.dir, fmt.Sprintf("%s-%06d%s", w.prefix, w.done, w.format.suffix))
		cur, err := w.format.create(w.path)
		if err != nil {
			return err
		}
		w.cur, w.samples = cur, 0
	}
	if err := w.cur.add(s); err != nil {
		return err
	}
	w.samples++
	w.total++
	return nil
}

// complete renames the shard in progress into place and says so.
func (w *shardSeq) complete() error {
	err := w.cur.commit()
	w.cur = nil
	if err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	w.done++
	st, err := os.Stat(w.path)
	if err != nil {
		return err
	}
	where := w.path
	if w.upload != nil {
		if where, err = w.upload(w.path); err != nil {
			return err
		}
	}
	line, _ := json.Marshal(map[string]any{"shard": where, "samples": w.samples, "bytes": st.Size()})
	_, err = fmt.Fprintf(w.out, "%s\n", line)
	return err
}

// finish completes the last shard and says what was written.
func (w *shardSeq) finish() error {
	if w.cur != nil {
		if err := w.complete(); err != nil {
			return err
		}
	}
	line, _ := json.Marshal(map[string]any{"done": true, "samples": w.total, "shards": w.done})
	_, err := fmt.Fprintf(w.out, "%s\n", line)
	return err
}

// abort removes the shard in progress, if any: nothing of it is left.
func (w *shardSeq) abort() {
	if w.cur != nil {
		w.cur.discard()
		w.cur = nil
	}
}
