package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/actorfeed/actorfeed/readers/recordio"
)

// maxGenFiles bounds gen --files.
const maxGenFiles = 1 << 16

func newGen() *cobra.Command {
	var s synthetic
	var out, comp string
	cmd := &cobra.Command{
		Use:   "gen --out DIR --files K --samples N",
		Short: "Write a synthetic RecordIO data set",
		Long: `Writes N Fashion-MNIST-shaped samples (a [1,28,28] uint8 image and a [1] int64
label) into K RecordIO files DIR/part-00000.recordio, ... The bytes depend only
on the flags, so sample ids (<file base name>#<record index>) are stable. Each
class has a prototype image and a sample is its prototype plus noise, so a
classifier can learn the set.`,
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
			s.compressor = c
			paths, err := s.write(cmd.Context(), out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d samples in %d files to %s (%v)\n", s.samples, len(paths), out, c)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the files to (created if missing)")
	f.IntVar(&s.files, "files", 4, "number of files")
	f.IntVar(&s.samples, "samples", 10000, "number of samples in all")
	f.Uint64Var(&s.seed, "seed", 1, "seed of the data")
	f.StringVar(&comp, "compressor", "snappy", "chunk compression: none, snappy or gzip")
	return cmd
}
