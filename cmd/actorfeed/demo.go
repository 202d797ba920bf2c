package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/program"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

type demoOptions struct {
	data, test  []string
	batch       int
	shuffle     int
	passes      int
	devices     int
	seed        uint64
	samples     int
	lr          float64
	minAccuracy float64
	every       time.Duration
	watch       watchOptions
}

func newDemo() *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Train a classifier on 2 devices fed by the actor pipeline (the built-in default)",
		Long: `Trains a softmax-regression classifier of 28x28 images, data-parallel on
--devices device actors, fed by open_files -> shuffle -> batch -> double buffer.
It reads Fashion-MNIST when it is installed (apt-get install
dataset-fashion-mnist), split into 4 RecordIO files in a temporary directory;
otherwise it writes a synthetic data set of the same shape there. After every
pass it reports the loss and the accuracy on the test set; at the end, a
summary of the run. It fails when the final test accuracy is below
--min-accuracy: images and labels that came apart on the way would show there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkInts(
				intFlag{"--batch", o.batch, 1, actors.MaxBatch},
				intFlag{"--passes", o.passes, 1, math.MaxInt32},
				intFlag{"--devices", o.devices, 1, actors.MaxConcurrency},
				intFlag{"--shuffle", o.shuffle, 0, actors.MaxWindow},
				intFlag{"--samples", o.samples, 100, math.MaxInt32},
			); err != nil {
				return usageError{err}
			}
			if o.lr <= 0 || o.every <= 0 {
				return usageError{fmt.Errorf("--lr and --progress-every must be positive")}
			}
			if err := o.watch.check(); err != nil {
				return usageError{err}
			}
			if len(o.data) > 0 && len(o.test) == 0 {
				return usageError{fmt.Errorf("--data needs --test, the data set to measure the accuracy on")}
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.Var(entriesValue{&o.data}, "data", "training files, globs or braces (format:path; records of a [1,28,28] uint8 image and a label); default Fashion-MNIST or synthetic")
	f.StringSliceVar(&o.test, "test", nil, "test files or globs, with --data")
	f.IntVar(&o.batch, "batch", 64, "batch size per device")
	f.IntVar(&o.shuffle, "shuffle", 4096, "shuffle window")
	f.IntVar(&o.passes, "passes", 5, "passes over the training data")
	f.IntVar(&o.devices, "devices", 2, "devices training data-parallel")
	f.Uint64Var(&o.seed, "seed", 1, "shuffle seed (and the synthetic data's)")
	f.IntVar(&o.samples, "samples", 20000, "training samples of the synthetic data set")
	f.Float64Var(&o.lr, "lr", 0.1, "learning rate")
	f.Float64Var(&o.minAccuracy, "min-accuracy", 0.8, "fail when the final test accuracy is lower")
	f.DurationVar(&o.every, "progress-every", 5*time.Second, "interval of the progress lines when not on a terminal")
	o.watch.flags(f)
	return cmd
}

// fashionMNIST is where the demo looks for Fashion-MNIST (tests move it).
var fashionMNIST = idx.FashionMNISTDir

// demoData finds or makes the demo's data: training files and test files.
func demoData(ctx context.Context, o demoOptions, dir string) (train, test []string, source string, err error) {
	if len(o.data) > 0 {
		if train, err = expand(ctx, o.data); err != nil {
			return nil, nil, "", err
		}
		if test, err = expand(ctx, o.test); err != nil {
			return nil, nil, "", err
		}
		return train, test, "your files", nil
	}
	images := filepath.Join(fashionMNIST, "train-images-idx3-ubyte.gz")
	if _, err := os.Stat(images); err == nil {
		train, err = shard(images, dir, 4)
		test = []string{"idx:" + filepath.Join(fashionMNIST, "t10k-images-idx3-ubyte.gz")}
		return train, test, "Fashion-MNIST (" + fashionMNIST + "), split into 4 RecordIO files", err
	}
	s := synthetic{files: 4, samples: o.samples, seed: o.seed, compressor: recordio.Snappy}
	if train, err = s.write(ctx, dir); err != nil {
		return nil, nil, "", err
	}
	held := synthetic{files: 1, samples: 2000, seed: o.seed, compressor: recordio.Snappy, first: o.samples}
	test, err = held.write(ctx, filepath.Join(dir, "test"))
	return train, test, fmt.Sprintf("synthetic, %d samples (install dataset-fashion-mnist for real data)", o.samples), err
}

// shard copies an IDX data set into k RecordIO files, record i to file i mod k.
func shard(images, dir string, k int) (paths []string, err error) {
	r, err := readers.Open("idx:"+images, readers.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ws := make([]*recordio.Writer, k)
	fs := make([]*os.File, k)
	defer func() {
		for i := range fs {
			if fs[i] != nil {
				err = errors.Join(err, fs[i].Close())
			}
		}
	}()
	for i := range k {
		paths = append(paths, filepath.Join(dir, fileName(i)))
		if fs[i], err = os.Create(paths[i]); err != nil {
			return nil, err
		}
		if ws[i], err = recordio.NewWriter(fs[i], recordio.WriterOptions{}); err != nil {
			return nil, err
		}
	}
	var rec []byte
	n := 0
	labels, _ := idx.CompanionLabels(images)
	for s, err := range int64Labels(readers.All(context.Background(), r), labels) { // the shape gen and convert write
		if err != nil {
			return nil, err
		}
		if rec, err = tensor.AppendEncode(rec[:0], s); err != nil {
			return nil, err
		}
		if err := ws[n%k].Write(rec); err != nil {
			return nil, err
		}
		n++
	}
	for _, w := range ws {
		if err := w.Close(); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// testSet reads the test files into batches of images and labels.
func testSet(ctx context.Context, entries []string) ([]tensor.Slots, error) {
	var out []tensor.Slots
	for _, e := range entries {
		r, err := readers.Open(e, readers.OpenOptions{})
		if err != nil {
			return nil, err
		}
		batches, err := readers.ReadAll(ctx, readers.Batch(r, 1000, false))
		r.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, batches...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the test set is empty")
	}
	return out, nil
}

func accuracyOn(m *softmax, test []tensor.Slots) (float64, int, error) {
	right, n := 0, 0
	for _, b := range test {
		if len(b) < 2 {
			return 0, 0, fmt.Errorf("test records hold %d slots, want an image and a label", len(b))
		}
		r, k, err := m.accuracy(b[0].Tensor, b[1].Tensor)
		if err != nil {
			return 0, 0, err
		}
		right, n = right+r, n+k
	}
	return float64(right) / float64(n), n, nil
}

func runDemo(ctx context.Context, out, errOut io.Writer, o demoOptions) error {
	dir, err := os.MkdirTemp("", "actorfeed-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	train, testFiles, source, err := demoData(ctx, o, dir)
	if err != nil {
		return err
	}
	test, err := testSet(ctx, testFiles)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "data:     %s\n", source)

	scope := program.NewScope(actors.Options{})
	defer scope.Close()
	startup := flagProgram(runOptions{shuffle: o.shuffle, seed: o.seed, batch: o.batch}, train)
	// Devices step in lockstep: a last step that would leave a device
	// without a batch is dropped.
	startup.Ops[len(startup.Ops)-1].Attrs = map[string]any{"drop_partial": true}
	if err := scope.Run(ctx, startup); err != nil {
		return err
	}
	model := newSoftmax(o.devices, float32(o.lr))
	s := &session{devices: o.devices, passes: o.passes, names: baseNames(scope.Reader("reader").Stages()), watch: o.watch, log: out,
		step: func(ctx context.Context, it actors.Item) error {
			if len(it.Slots) < 2 {
				return fmt.Errorf("records hold %d slots, want an image and a label", len(it.Slots))
			}
			return model.step(ctx, it.Slots[0].Tensor, it.Slots[1].Tensor)
		}}
	if err := s.launch(ctx, scope, "reader"); err != nil {
		return err
	}
	fmt.Fprintf(out, "pipeline: %s -> %d devices training softmax regression (lr %g), %d passes\n",
		describe(scope.Reader("reader").Stages()), o.devices, o.lr, o.passes)
	s.progress = newProgress(errOut, o.every, countSamples(scope.Reader("reader").Stages(), o.passes))
	var acc float64
	var n int
	passStart := time.Now()
	err = s.run(ctx, func(pass int) error {
		loss := model.lastLoss()
		var err error
		if acc, n, err = accuracyOn(model, test); err != nil {
			return err
		}
		fmt.Fprintf(out, "pass %d/%d: loss %.3f, test accuracy %.4f (%v)\n", pass+1, o.passes, loss, acc, time.Since(passStart).Round(time.Millisecond))
		passStart = time.Now()
		return nil
	})
	if err != nil {
		return err
	}
	s.summary(out)
	fmt.Fprintf(out, "test accuracy: %.4f on %d samples\n", acc, n)
	if acc < o.minAccuracy {
		return fmt.Errorf("test accuracy %.4f is below %.2f: are images and labels aligned?", acc, o.minAccuracy)
	}
	return nil
}
