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
	var out, comp, to string
	var perShard int
	cmd := &cobra.Command{
		Use:   "convert IMAGES|FOLDER --out FILE|DIR",
		Short: "Convert an IDX data set (Fashion-MNIST) or an image folder to RecordIO, WebDataset or TFRecord",
		Long: `Reads an IDX file, raw or gzipped, and writes one RecordIO record per sample,
or, with --to wds or --to tfrecord, shards into the directory --out.
For an images file (…images-idx3-ubyte[.gz]) the labels file next to it is
paired by the MNIST naming convention, and each record holds (image, label),
the label widened to int64 as gen writes it. A WebDataset shard holds
sample i as NNNNNNNN.png (8-bit gray) and NNNNNNNN.cls; a TFRecord shard
a tf.train.Example of features image (PNG bytes) and label (int64), as
TensorFlow Datasets writes Fashion-MNIST; --shard-samples a shard.
Record i of the output is sample i of the input.

A directory is an image folder, as torchvision's ImageFolder reads one:
a subdirectory of images a class, the classes sorted by name and numbered
from 0, the images (.jpg, .jpeg, .png, .ppm, .bmp, .pgm, .tif, .tiff,
.webp) in ImageFolder's order. With --to wds a shard holds image i's file
as it is, NNNNNNNN.<its extension>, and NNNNNNNN.cls; with --to tfrecord,
features image (the file's bytes) and label. classes.json beside the
shards lists the classes by index.`,
		Example: "  actorfeed convert /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz --to wds --out out/shards",
		Args:    cobra.ExactArgs(1),
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
			switch {
			case out == "":
				return usageError{fmt.Errorf("--out is required")}
			case to != "recordio" && shardFormats[to].new == nil:
				return usageError{fmt.Errorf("--to %q: want recordio, wds or tfrecord", to)}
			case perShard < 1 || perShard > maxShardSamples:
				return usageError{fmt.Errorf("--shard-samples %d: want 1 to %d", perShard, maxShardSamples)}
			}
			if st, err := os.Stat(path); err == nil && st.IsDir() {
				if to == "recordio" {
					return usageError{fmt.Errorf("%s is an image folder: convert it --to wds or --to tfrecord", path)}
				}
				var n, shards int
				err := toObjects(cmd.Context(), out, false, func(dir string) (err error) {
					n, shards, err = convertFolder(cmd.Context(), path, dir, perShard, to)
					return err
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %d images to %d shard(s) in %s, their classes in classes.json\n", n, shards, out)
				return nil
			}
			if to != "recordio" {
				var n, shards int
				err := toObjects(cmd.Context(), out, false, func(dir string) (err error) {
					n, shards, err = convertShards(cmd.Context(), path, dir, perShard, shardFormats[to])
					return err
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %d samples to %d shard(s) in %s\n", n, shards, out)
				return nil
			}
			var n int
			err = toObjects(cmd.Context(), out, true, func(file string) (err error) {
				n, err = convertIDX(cmd.Context(), path, file, c)
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d records to %s (%v)\n", n, out, c)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "RecordIO file to write; with --to wds or tfrecord, the directory of the shards (either may be s3://bucket/key)")
	cmd.Flags().StringVar(&to, "to", "recordio", "output format: recordio, wds (WebDataset shards of PNG images) or tfrecord (TFRecord shards of PNG images)")
	cmd.Flags().StringVar(&comp, "compressor", "snappy", "chunk compression: none, snappy or gzip")
	cmd.Flags().IntVar(&perShard, "shard-samples", 10000, "with --to wds or tfrecord: samples a shard")
	return cmd
}

// convertIDX writes every sample of the IDX file at path to a RecordIO file.
// The output appears complete or not at all: a failed or stopped conversion
// leaves out as it was. An output that is one of the inputs is refused
// before anything is read.
func convertIDX(ctx context.Context, path, out string, c recordio.Compressor) (int, error) {
	inputs := []string{path}
	labels, paired := idx.CompanionLabels(path)
	if paired {
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
	return readers.WriteRecordFile(out, recordio.WriterOptions{Compressor: c}, int64Labels(readers.All(ctx, r), labels))
}

// int64Labels widens an integer label slot (IDX's uint8, int8, int16 or
// int32) to int64, so that a converted data set has the shape gen writes:
// [1,28,28] uint8 images and [1] int64 labels. A label slot of floats is
// no class number: it fails, naming the labels file.
func int64Labels(samples iter.Seq2[tensor.Slots, error], labels string) iter.Seq2[tensor.Slots, error] {
	return func(yield func(tensor.Slots, error) bool) {
		for s, err := range samples {
			if err == nil && len(s) == 2 && len(s[1].LoD) == 0 {
				s[1].Tensor, err = widen(s[1].Tensor)
				if err != nil {
					err = fmt.Errorf("%s: %w: labels are class numbers; convert takes integer labels (uint8, int8, int16, int32)", labels, err)
				}
			}
			if !yield(s, err) || err != nil {
				return
			}
		}
	}
}

// widen makes an integer tensor int64; other dtypes are an error.
func widen(t tensor.Tensor) (tensor.Tensor, error) {
	switch t.DType() {
	case tensor.Int64:
		return t, nil
	case tensor.Uint8:
		return widenAs[uint8](t)
	case tensor.Int8:
		return widenAs[int8](t)
	case tensor.Int16:
		return widenAs[int16](t)
	case tensor.Int32:
		return widenAs[int32](t)
	}
	return tensor.Tensor{}, fmt.Errorf("%v labels", t.DType())
}

func widenAs[T uint8 | int8 | int16 | int32](t tensor.Tensor) (tensor.Tensor, error) {
	v, err := tensor.View[T](t)
	if err != nil {
		return tensor.Tensor{}, err
	}
	wide := make([]int64, len(v))
	for i, b := range v {
		wide[i] = int64(b)
	}
	return tensor.FromSlice(t.Shape(), wide)
}
