package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

func newInspect() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show a data file's contents and damage: RecordIO, IDX, WebDataset or TFRecord",
		Long: `For a RecordIO file: every chunk (offset, records, compression, size) with its
checksum verdict, the record count and the slot shapes of the first record.
For an IDX file: the header and, for an images file, its labels file. For a
WebDataset shard (.tar, .tar.gz): its members, its samples as run reads them
(every field decoded), their fields and their first and last keys. For a
TFRecord file: its records, each checked against both its CRCs (of the
length and of the data) and parsed as a tf.train.Example, and the first
record's features (or those of tfrecord(features):FILE). FILE is a path or
format:path. A damaged file is listed in full, with its damaged chunks,
samples or records (the first 10 named), and then the command fails naming
the first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, path, err := readers.ParseEntry(args[0])
			if err != nil {
				return usageError{err} // an unknown format is a bad command line, as in run
			}
			if name == "" {
				name = formatOf(path)
			}
			format, params, _ := strings.Cut(strings.TrimSuffix(name, ")"), "(")
			switch format {
			case "recordio":
				return inspectRecordIO(cmd.Context(), cmd.OutOrStdout(), path)
			case "idx":
				return inspectIDX(cmd.Context(), cmd.OutOrStdout(), path)
			case "wds":
				return inspectWDS(cmd.Context(), cmd.OutOrStdout(), path)
			case "tfrecord":
				return inspectTFRecord(cmd.Context(), cmd.OutOrStdout(), path, params)
			}
			return usageError{fmt.Errorf("%s: cannot inspect format %q (recordio, idx, wds or tfrecord)", path, name)}
		},
	}
}

// formatOf guesses a file's format from its name, as the registry does.
func formatOf(path string) string {
	switch {
	case strings.HasSuffix(path, ".recordio"), strings.HasSuffix(path, ".rio"):
		return "recordio"
	case strings.Contains(path, "-ubyte"), strings.HasSuffix(path, ".idx"):
		return "idx"
	case strings.HasSuffix(path, ".tar"), strings.HasSuffix(path, ".tar.gz"), strings.HasSuffix(path, ".tgz"):
		return "wds"
	case strings.Contains(path, ".tfrecord"):
		return "tfrecord"
	}
	return "recordio"
}

// inspectRecordIO lists and checks every chunk; a stop through ctx ends it
// between chunks.
func inspectRecordIO(ctx context.Context, out io.Writer, path string) error {
	fh, size, err := format.OpenFile("recordio", path)
	if err != nil {
		return err
	}
	defer fh.Close()
	index, err := recordio.LoadIndex(fh, size, path)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "file:    %s\nformat:  recordio, %d bytes, %d chunks, %d records\n", path, size, len(index.Chunks), index.NumRecords)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "chunk\toffset\trecords\tcompressor\tstored bytes\tchecksum\t")
	var shapes string
	var bad []error
	for _, c := range index.Chunks {
		if err := context.Cause(ctx); err != nil {
			tw.Flush()
			return err
		}
		recs, err := recordio.ReadChunk(fh, size, path, c)
		verdict := "ok"
		if err == nil {
			err = decodeChunk(path, c, recs)
		}
		if err != nil {
			verdict = "BAD"
			bad = append(bad, err)
		} else if shapes == "" && len(recs) > 0 {
			shapes = describeRecord(recs[0])
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%v\t%d\t%s\t\n", c.Index, c.Offset, c.NumRecords, c.Compressor, c.StoredSize, verdict)
	}
	tw.Flush()
	if shapes != "" {
		fmt.Fprintf(out, "slots:   %s (first record)\n", shapes)
	}
	fmt.Fprintf(out, "whole:   %v\n", index.Completeness)
	for _, d := range index.Damage {
		why := d.Err
		if fe, ok := errors.AsType[*format.Error](d.Err); ok {
			why = fe.Err
		}
		fmt.Fprintf(out, "damaged: chunk %d, %d bytes at offset %d: %s\n", d.Chunk, d.Bytes, d.Offset, cause(why))
	}
	if n := len(bad) + index.Damaged; n > 0 {
		if len(bad) == 0 || index.Damaged > 0 && index.Damage[0].Offset < offsetOf(bad[0]) {
			bad = append([]error{index.Err()}, bad...)
		}
		return fmt.Errorf("%d of %d chunks are damaged; the first: %w", n, len(index.Chunks)+index.Damaged, bad[0])
	}
	if index.Completeness == recordio.CutShort {
		return fmt.Errorf("%s: %w: the file ends without the trailer its first chunk announced: cut short after record %d", path, format.ErrCorrupt, index.NumRecords)
	}
	fmt.Fprintln(out, "verdict: every checksum matches, every record is one instance")
	return nil
}

// decodeChunk decodes every record of a chunk as run reads it, so that
// inspect passes exactly the files run reads.
func decodeChunk(path string, c recordio.ChunkInfo, recs [][]byte) error {
	for i, rec := range recs {
		if _, err := readers.DecodeRecord(rec); err != nil {
			return &format.Error{Format: "recordio", File: path, Chunk: c.Index, Record: c.FirstRecord + i, Offset: c.Offset, Err: err}
		}
	}
	return nil
}

// describeRecord lists a record's slots as dtype[shape], with LoD levels.
func describeRecord(rec []byte) string {
	s, err := tensor.Decode(rec)
	if err != nil {
		return "undecodable: " + err.Error()
	}
	parts := make([]string, len(s))
	for i, t := range s {
		parts[i] = fmt.Sprintf("%d: %v%v", i, t.DType(), t.Shape())
		if len(t.LoD) > 0 {
			parts[i] += fmt.Sprintf(" lod %d levels", len(t.LoD))
		}
	}
	return strings.Join(parts, ", ")
}

func inspectIDX(ctx context.Context, out io.Writer, path string) error {
	r, err := idx.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	h := r.Header()
	fmt.Fprintf(out, "file:    %s\nformat:  idx, %v, dims %v, header %d bytes\nsamples: %d of %v%v\n",
		path, h.DType, h.Dims, h.Size, h.Samples(), h.DType, h.SampleShape())
	if labels, ok := idx.CompanionLabels(path); ok {
		fmt.Fprintf(out, "labels:  %s\n", labels)
	}
	n := 0
	for {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		if _, err := r.Next(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		n++
	}
	fmt.Fprintf(out, "verdict: all %d samples read\n", n)
	return nil
}

// offsetOf is where in its file err locates the failure, -1 if nowhere.
func offsetOf(err error) int64 {
	if fe, ok := errors.AsType[*format.Error](err); ok {
		return fe.Offset
	}
	return -1
}
