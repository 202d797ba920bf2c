package main

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

func newConvert() *cobra.Command {
	var out, comp string
	cmd := &cobra.Command{
		Use:   "convert IMAGES --out FILE",
		Short: "Convert an IDX data set (Fashion-MNIST) to RecordIO",
		Long: `Reads an IDX file, raw or gzipped, and writes one RecordIO record per sample.
For an images file (…images-idx3-ubyte[.gz]) the labels file next to it is
paired by the MNIST naming convention, and each record holds (image, label),
the label widened to int64 as gen writes it.
Record i of the output is sample i of the input.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if name, p, err := readers.ParseEntry(path); err == nil && p != path { // a format: prefix, as run and inspect take
				if name != "idx" {
					return usageError{fmt.Errorf("%s: convert reads IDX files, not %s", args[0], name)}
				}
				path = p
			}
			c, err := recordio.ParseCompressor(comp)
			if err != nil {
				return usageError{fmt.Errorf("--compressor: %w", err)}
			}
			if out == "" {
				return usageError{fmt.Errorf("--out is required")}
			}
			n, err := convertIDX(cmd.Context(), path, out, c)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d records to %s (%v)\n", n, out, c)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "RecordIO file to write")
	cmd.Flags().StringVar(&comp, "compressor", "snappy", "chunk compression: none, snappy or gzip")
	return cmd
}

// convertIDX writes every sample of the IDX file at path to a RecordIO file.
// The output appears complete or not at all: a failed or stopped conversion
// leaves out as it was. An output that is one of the inputs is refused
// before anything is read.
func convertIDX(ctx context.Context, path, out string, c recordio.Compressor) (int, error) {
	inputs := []string{path}
	if labels, ok := idx.CompanionLabels(path); ok {
		inputs = append(inputs, labels)
	}
	if err := atomicfile.Refuse(out, inputs...); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, err
	}
	r, err := readers.Open("idx:"+path, readers.OpenOptions{})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return readers.WriteRecordFile(out, recordio.WriterOptions{Compressor: c}, int64Labels(readers.All(ctx, r)))
}

// int64Labels makes a uint8 label slot (IDX's) an int64 one, so that a
// converted data set has the shape gen writes: [1,28,28] uint8 images and
// [1] int64 labels.
func int64Labels(samples iter.Seq2[tensor.Slots, error]) iter.Seq2[tensor.Slots, error] {
	return func(yield func(tensor.Slots, error) bool) {
		for s, err := range samples {
			if err == nil && len(s) == 2 && s[1].DType() == tensor.Uint8 && len(s[1].LoD) == 0 {
				v, _ := tensor.View[uint8](s[1].Tensor)
				wide := make([]int64, len(v))
				for i, b := range v {
					wide[i] = int64(b)
				}
				s[1] = tensor.LoDTensor{Tensor: tensor.MustFromSlice(s[1].Shape(), wide)}
			}
			if !yield(s, err) {
				return
			}
		}
	}
}
