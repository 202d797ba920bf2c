package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

type demoOptions struct {
	data    string
	batch   int
	window  int
	passes  int
	seed    uint64
	samples int
}

func newDemo() *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the built-in default pipeline and print a summary",
		Long: `Reads Fashion-MNIST (or a synthetic data set of the same shape when it is not
installed) through shuffle -> batch -> prefetch for several passes and prints a
summary. It fails if a batch's images and labels differ in count, if a pass
delivers other per-class counts than pass 0, or if a synthetic pass delivers
other than --samples samples.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.batch < 1 || o.passes < 1 || o.window < 0 || o.samples < 1 {
				return usageError{fmt.Errorf("--batch, --passes and --samples must be at least 1, --shuffle at least 0")}
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.data, "data", "", "file list entry to read (format:path); default Fashion-MNIST or synthetic")
	f.IntVar(&o.batch, "batch", 128, "batch size")
	f.IntVar(&o.window, "shuffle", 4096, "shuffle window (0 keeps order)")
	f.IntVar(&o.passes, "passes", 3, "passes over the data")
	f.Uint64Var(&o.seed, "seed", 1, "shuffle seed")
	f.IntVar(&o.samples, "samples", 20000, "samples in the synthetic data set")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, o demoOptions) error {
	entry, source := o.data, o.data
	expected := 0 // samples per pass, when the demo wrote the data itself
	if entry == "" {
		entry = filepath.Join(idx.FashionMNISTDir, "train-images-idx3-ubyte.gz")
		source = "Fashion-MNIST (" + idx.FashionMNISTDir + ")"
		if _, err := os.Stat(entry); err != nil {
			dir, err := os.MkdirTemp("", "actorfeed-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			entry = filepath.Join(dir, "synthetic.recordio")
			if err := writeSynthetic(entry, o.samples, o.seed); err != nil {
				return err
			}
			source = fmt.Sprintf("synthetic RecordIO, %d samples (install dataset-fashion-mnist for real data)", o.samples)
			expected = o.samples
		}
	}
	fmt.Fprintf(out, "source:   %s\npipeline: %s -> shuffle(%d, seed %d) -> batch(%d) -> buffered(2), %d passes\n",
		source, entry, o.window, o.seed, o.batch, o.passes)

	file, err := readers.Open(entry, readers.OpenOptions{})
	if err != nil {
		return err
	}
	r := readers.Buffered(readers.Batch(readers.Shuffle(file, o.window, o.seed), o.batch, false), 2)
	defer r.Close()

	start := time.Now()
	total, batches := 0, 0
	passes := passChecker{expected: expected}
	for pass := range o.passes {
		if pass > 0 {
			if err := r.Reset(); err != nil {
				return err
			}
		}
		passStart := time.Now()
		n, perLabel := 0, map[int64]int{}
		for batch, err := range readers.All(ctx, r) {
			if err != nil {
				return err
			}
			if len(batch) != 2 || batch[0].Rows() != batch[1].Rows() {
				return fmt.Errorf("pass %d batch %d: images and labels not aligned: %v", pass, batches, batch)
			}
			if err := countLabels(batch[1].Tensor, perLabel); err != nil {
				return err
			}
			n += batch[0].Rows()
			batches++
		}
		if err := passes.check(pass, n, perLabel); err != nil {
			return err
		}
		total += n
		el := time.Since(passStart)
		fmt.Fprintf(out, "pass %d:   %d samples in %v (%.0f samples/s), %d classes\n",
			pass, n, el.Round(time.Millisecond), float64(n)/el.Seconds(), len(perLabel))
	}
	el := time.Since(start)
	fmt.Fprintf(out, "summary:  %d samples, %d batches, %v, %.0f samples/s\n",
		total, batches, el.Round(time.Millisecond), float64(total)/el.Seconds())
	return nil
}

// passChecker verifies that passes agree: every pass delivers the per-class
// counts of pass 0, and expected samples when that is known (> 0).
type passChecker struct {
	expected int
	first    map[int64]int
}

func (c *passChecker) check(pass, n int, perClass map[int64]int) error {
	if c.expected > 0 && n != c.expected {
		return fmt.Errorf("pass %d delivered %d samples, the data set holds %d", pass, n, c.expected)
	}
	if c.first == nil {
		c.first = perClass
	} else if !maps.Equal(c.first, perClass) {
		return fmt.Errorf("pass %d delivered per-class counts %v, pass 0 delivered %v", pass, perClass, c.first)
	}
	return nil
}

// countLabels adds the labels of a batch, whatever their integer type.
func countLabels(t tensor.Tensor, into map[int64]int) error {
	switch t.DType() {
	case tensor.Uint8:
		return addLabels[uint8](t, into)
	case tensor.Int64:
		return addLabels[int64](t, into)
	}
	return fmt.Errorf("labels of type %v, want uint8 or int64", t.DType())
}

func addLabels[T uint8 | int64](t tensor.Tensor, into map[int64]int) error {
	v, err := tensor.View[T](t)
	if err != nil {
		return err
	}
	for _, x := range v {
		into[int64(x)]++
	}
	return nil
}

// writeSynthetic writes n Fashion-MNIST-shaped samples: a [1,28,28] uint8
// image whose pixels encode the label, and a [1] int64 label in 0..9.
func writeSynthetic(path string, n int, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := recordio.NewWriter(f, recordio.WriterOptions{Compressor: recordio.Snappy})
	if err != nil {
		f.Close()
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	img := make([]uint8, 28*28)
	var rec []byte
	for i := range n {
		label := int64(i % 10)
		for k := range img {
			img[k] = uint8(rng.IntN(64)) + uint8(label*16)
		}
		s := tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, img)},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{label})},
		}
		if rec, err = tensor.AppendEncode(rec[:0], s); err != nil {
			break
		}
		if err = w.Write(rec); err != nil {
			break
		}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
