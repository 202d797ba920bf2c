package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/actorfeed/actorfeed/readers/recordio"
)

// maxGenFiles bounds gen --files.
const maxGenFiles = 1 << 16

func newGen() *cobra.Command {
	var s synthetic
	var out, comp, to string
	var size int
	cmd := &cobra.Command{
		Use:   "gen --out DIR --files K --samples N",
		Short: "Write a synthetic data set: RecordIO, or JPEG images in shards",
		Long: `Writes N Fashion-MNIST-shaped samples (a [1,28,28] uint8 image and a [1] int64
label) into K RecordIO files DIR/part-00000.recordio, ... The bytes depend only
on the flags, so sample ids (<file base name>#<record index>) are stable. Each
class has a prototype image and a sample is its prototype plus noise, so a
classifier can learn the set.

With --to idx it writes the same samples as K IDX pairs, as Fashion-MNIST's
files are: DIR/part-00000-images-idx3-ubyte (uint8 images) and
DIR/part-00000-labels-idx1-ubyte (uint8 labels), ..., records of a fixed
size that a global order (run --shuffle all) reads by position.

With --to wds or --to tfrecord it writes N JPEG images instead, each 3/4 to
5/4 of --image-size a side, of one of 10 classes (a colour and stripes of
its own, plus noise), as K WebDataset shards (NNNNNNNN.jpg, NNNNNNNN.cls)
or TFRecord files (image, label), sample i in shard i mod K.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := recordio.ParseCompressor(comp)
			if err != nil {
				return usageError{fmt.Errorf("--compressor: %w", err)}
			}
			if out == "" {
				return usageError{fmt.Errorf("--out is required")}
			}
			// A sample id holds the record in 40 bits, and a data set of more
			// files than that is a mistake (one made a slice of --files).
			if err := checkInts(intFlag{"--files", s.files, 1, maxGenFiles}, intFlag{"--samples", s.samples, s.files, 1 << 40}); err != nil {
				return usageError{err}
			}
			s.idx = to == "idx"
			if to != "recordio" && !s.idx {
				return genImages(cmd, out, to, imageSet{files: s.files, samples: s.samples, size: size, seed: s.seed, format: to})
			}
			s.compressor = c
			var paths []string
			err = toObjects(cmd.Context(), out, false, func(dir string) error {
				if err := s.fits(cmd.Context(), dir); err != nil {
					return err
				}
				paths, err = s.write(cmd.Context(), dir)
				return err
			})
			if err != nil {
				return err
			}
			if s.idx {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %d samples in %d IDX pairs to %s\n", s.samples, len(paths), out)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d samples in %d files to %s (%v)\n", s.samples, len(paths), out, c)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the files to (created if missing), or s3://bucket/prefix")
	f.IntVar(&s.files, "files", 4, "number of files")
	f.IntVar(&s.samples, "samples", 10000, "number of samples in all")
	f.Uint64Var(&s.seed, "seed", 1, "seed of the data")
	f.StringVar(&comp, "compressor", "snappy", "chunk compression: none, snappy or gzip")
	f.StringVar(&to, "to", "recordio", "recordio, idx (IDX pairs), or JPEG images as wds (WebDataset shards) or tfrecord")
	f.IntVar(&size, "image-size", 256, "with --to wds or tfrecord: the images' typical side in pixels")
	return cmd
}

// genImages writes gen's JPEG image set.
func genImages(cmd *cobra.Command, out, to string, s imageSet) error {
	if shardFormats[to].new == nil {
		return usageError{fmt.Errorf("--to %q: want recordio, idx, wds or tfrecord", to)}
	}
	if err := checkInts(intFlag{"--image-size", s.size, 8, maxImageSize}, intFlag{"--samples", s.samples, s.files, 1 << 24}); err != nil {
		return usageError{err}
	}
	if err := toObjects(cmd.Context(), out, false, func(dir string) error { return s.write(cmd.Context(), dir) }); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %d JPEG images in %d %s shards to %s\n", s.samples, s.files, to, out)
	return nil
}

// fits refuses a set that dir's file system cannot hold: 10^8 samples
// started writing about 80 GB without a word. The size is estimated by
// writing a sample of the set (1,024 samples, compressed as asked) aside.
func (s synthetic) fits(ctx context.Context, dir string) error {
	probe, err := os.MkdirTemp("", "actorfeed-gen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(probe)
	p := s
	p.files, p.samples = 1, min(s.samples, 1024)
	paths, err := p.write(ctx, probe)
	if err != nil {
		return err
	}
	st, err := os.Stat(paths[0])
	if err != nil {
		return err
	}
	need := st.Size() * int64(s.samples) / int64(p.samples)
	free, where, err := freeBytes(dir)
	if err != nil {
		return err
	}
	if need > free-free/10 { // a file system filled to the last byte fails everything on it
		return fmt.Errorf("%d samples take about %.1f GB (%d bytes a sample, %v), and %s has %.1f GB free, of which gen leaves a tenth: write fewer (--samples) or elsewhere (--out)",
			s.samples, float64(need)/1e9, st.Size()/int64(p.samples), s.compressor, where, float64(free)/1e9)
	}
	return nil
}

// freeBytes is the space an unprivileged writer has left on the file
// system that would hold dir: that of its nearest existing ancestor.
func freeBytes(dir string) (int64, string, error) {
	at, err := filepath.Abs(dir)
	if err != nil {
		return 0, "", err
	}
	for {
		var st unix.Statfs_t
		err := unix.Statfs(at, &st)
		if err == nil {
			return int64(st.Bavail) * st.Bsize, at, nil
		}
		up := filepath.Dir(at)
		if !errors.Is(err, unix.ENOENT) || up == at {
			return 0, "", fmt.Errorf("the free space at %s: %w", at, err)
		}
		at = up
	}
}
