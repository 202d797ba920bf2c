package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/baseline"
	"github.com/actorfeed/actorfeed/internal/harness/benchmark"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

type benchOptions struct {
	samples, repeat, passes, batch, window, buffer, deviceBatch int
	plot                                                        string
	matrix                                                      matrixOptions
	serviceWorkers                                              []string
	serviceMap                                                  string
	system                                                      *actor.ActorSystem // shared by the runs, as a trainer shares one
}

// benchHelp is the bench command's long help.
const benchHelp = `Writes Fashion-MNIST-sized samples (a 784-byte image and a label) to RecordIO,
uncompressed and snappy, and measures side by side, --repeat times each,
taking turns and each from a collected heap: a plain copy of the file's bytes
(memory bandwidth), a plain read of the file (page cache), two hand-written
goroutine-and-channel pipelines (internal/baseline: a record at a time, and on
the actor pipeline's stacked read path, with fresh and with recycled batch
storage), and the actor pipeline open_files -> shuffle -> batch -> double
buffer -> device: a pass of a running pipeline (Reset between passes, as a
trainer runs epochs), with fresh and with recycled batch storage, and a new
pipeline for each pass. Every device reads every image byte. It reports medians and
ratios; then the time to the first batch; the device's busy fraction and
waits with a simulated step twice the pipeline's time per batch (the step
waits without using the CPU, as a host thread waiting for its accelerator
does; batches of --device-batch, so that the step is long enough for a
timer); allocations per batch; and the heap after each of --passes passes.
--plot draws the figures.

With --sizes or --procs it measures a matrix instead: for each sample size
(--sizes 784,16K,150K), uncompressed and snappy, --data-mb of samples in
--files files, and for each GOMAXPROCS (--procs 1,2,all): the plain read of
the files (one goroutine per core), the hand-written pipeline with one lane
per core (internal/baseline's Parallel), and a new actor pipeline for each
run, with one lane and with one lane per core (--lanes), all feeding
--devices devices that read every image byte. It reports
samples/s, GB/s, the ratios to the plain read, to the parallel baseline and
to the fewest cores measured, and the CPU seconds per million samples.
With --device cuda the actor pipeline's devices copy their batches, made in
page-locked memory, to the machine's GPUs, and a line per cell says how
many bytes a second reached them, against a plain page-locked copy
measured in the same run, and how busy their streams were.

With --service-workers 1,2 it measures the data service instead
(docs/distributed.md): for each --sizes, uncompressed, a new actor pipeline
for each run in this process, and the same pipeline with its stages before
the double buffer on 1, 2, ... actorfeed serve processes on loopback that it
starts, and the same bytes alone through one loopback TCP connection (the
ceiling of any worker's batches here), taking turns; samples/s, GB/s, the
ratio to the in-process one, and the CPU seconds per million samples of
this process and the workers together.
--map normalize adds a map with a CPU cost after the batch stage.`

func newBench() *cobra.Command {
	o := benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the actor pipeline against the machine's limits and a channel pipeline, in one run",
		Long:  benchHelp,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.flags(cmd.Flags())
	return cmd
}

// run checks the flags and runs what they ask for.
func (o *benchOptions) run(cmd *cobra.Command) error {
	if err := checkInts(
		intFlag{"--samples", o.samples, 1000, 1 << 30},
		intFlag{"--repeat", o.repeat, 1, 1000},
		intFlag{"--passes", o.passes, 2, 100000},
		intFlag{"--batch", o.batch, 1, actors.MaxBatch},
		intFlag{"--shuffle", o.window, 0, actors.MaxWindow},
		intFlag{"--buffer", o.buffer, 1, actors.MaxQueue},
		intFlag{"--device-batch", o.deviceBatch, 1, actors.MaxBatch},
		intFlag{"--files", o.matrix.files, 1, 4096},
		intFlag{"--devices", o.matrix.devices, 1, actors.MaxConcurrency},
		intFlag{"--data-mb", o.matrix.dataMB, 1, 1 << 16},
	); err != nil {
		return usageError{err}
	}
	if cmd.Flags().Changed("service-workers") {
		if !cmd.Flags().Changed("sizes") {
			o.matrix.sizes = []string{"784", "150K"}
		}
		return runServiceBench(cmd.Context(), cmd.OutOrStdout(), *o)
	}
	if o.matrix.asked(cmd.Flags()) {
		return runMatrix(cmd.Context(), cmd.OutOrStdout(), *o)
	}
	return runBench(cmd.Context(), cmd.OutOrStdout(), *o)
}

// flags registers the command's flags on o.
func (o *benchOptions) flags(f *pflag.FlagSet) {
	f.IntVar(&o.samples, "samples", 60000, "samples in each file (60,000: Fashion-MNIST's training set)")
	f.IntVar(&o.repeat, "repeat", 5, "runs of each measurement (medians are reported)")
	f.IntVar(&o.passes, "passes", 50, "passes of the memory measurement")
	f.IntVar(&o.batch, "batch", 64, "batch size")
	f.IntVar(&o.window, "shuffle", 1024, "shuffle window")
	f.IntVar(&o.buffer, "buffer", 2, "double buffer window, in batches per device")
	f.StringVar(&o.plot, "plot", "", "also draw the figures into this directory: throughput.png, device-waits.png, heap.png")
	o.matrix.flags(f)
	f.StringVar(&o.serviceMap, "map", "", "with --service-workers: a built-in map after the batch stage, run on the workers (normalize, to_tensor)")
	f.StringSliceVar(&o.serviceWorkers, "service-workers", nil, "measure the data service instead: the pipeline on this many actorfeed serve processes on loopback (as 1,2), against the same pipeline in process, for each --sizes (default 784,150K), uncompressed")
	f.IntVar(&o.deviceBatch, "device-batch", 1024, "batch size of the device-busy measurement (its step must be a few ms for a timer to simulate it)")
}

// touch is the simulated device's work: it reads every byte of the images.
func touch(s tensor.Slots) { baseline.Touch(s[0].Bytes()) }

func runBench(ctx context.Context, out io.Writer, o benchOptions) error {
	var figs benchFigures
	sys := actors.NewSystem()
	defer sys.Shutdown()
	o.system = sys
	dir, err := os.MkdirTemp("", "actorfeed-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(out, "%d samples of a [1,28,28] uint8 image and an int64 label per file; shuffle %d, batch %d; %d runs each, medians; %s, %d CPUs\n\n",
		o.samples, o.window, o.batch, o.repeat, runtime.Version(), runtime.NumCPU())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "file\twhat\tsamples/s\tMB/s\tvs channels\tvs stacked\tvs copy\t")
	var snappyPath string
	for _, comp := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy} {
		paths, err := synthetic{files: 1, samples: o.samples, seed: 1, compressor: comp}.write(ctx, filepath.Join(dir, comp.String()))
		if err != nil {
			return err
		}
		path := paths[0]
		if comp == recordio.Snappy {
			snappyPath = path
		}
		if err := benchThroughput(ctx, tw, comp, path, o, &figs); err != nil {
			return err
		}
	}
	tw.Flush()
	if err := benchDevices(ctx, out, snappyPath, o, &figs); err != nil {
		return err
	}
	if o.plot == "" {
		return nil
	}
	written, err := plotBench(o.plot, figs)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "figures: %s\n", strings.Join(written, ", "))
	return nil
}

// The rows of the throughput table.
const (
	copyRow, readRow = "plain copy of the file's bytes", "plain read of the file"
	chRow, stRow     = "channel pipeline, a record at a time", "channel pipeline, stacked read path"
	srRow            = "channel pipeline, stacked, recycled batches"
	acRow, rcRow     = "actor pipeline", "actor pipeline, recycled batches"
	nwRow            = "actor pipeline, a new one for each pass"
	aoRow            = "actor pipeline, any order (not deterministic)"
)

// benchThroughput measures the pipelines over the file at path and writes
// their rows to tw. The running pipelines it keeps for the measurement are
// closed before it returns, so that they are not in the later measurements'
// heap.
func benchThroughput(ctx context.Context, tw io.Writer, comp recordio.Compressor, path string, o benchOptions, figs *benchFigures) error {
	data, err := os.ReadFile(path) // also warms the page cache
	if err != nil {
		return err
	}
	payload := int64(o.samples) * (pixels + 8)
	dst := make([]byte, len(data))
	buf := make([]byte, 1<<20)
	// The actor pipeline's throughput is that of a running pipeline, as
	// a trainer keeps one across passes (Reset between them), after an
	// untimed first pass; the last row builds a new one for every pass,
	// spawning its actors and filling its windows each time.
	running, err := startRunning(ctx, o, path)
	defer func() {
		for _, r := range running {
			r.Close()
		}
	}()
	if err != nil {
		return err
	}
	fresh, recycled, anyOrder := running[0], running[1], running[2]
	runs := []turn{
		{copyRow, func() error { copy(dst, data); return nil }},
		{readRow, func() error { return readFile(path, buf) }},
		{chRow, func() error {
			_, err := baseline.Channels(ctx, []string{path}, o.window, o.batch, 1, touch)
			return err
		}},
		{stRow, func() error {
			_, err := baseline.Stacked(ctx, []string{path}, o.stacked(false), touch)
			return err
		}},
		{srRow, func() error {
			_, err := baseline.Stacked(ctx, []string{path}, o.stacked(true), touch)
			return err
		}},
		{acRow, func() error { _, err := fresh.Pass(ctx); return err }},
		{rcRow, func() error { _, err := recycled.Pass(ctx); return err }},
		{nwRow, func() error { _, _, err := o.config(path).Pass(ctx, false, touch); return err }},
		{aoRow, func() error { _, err := anyOrder.Pass(ctx); return err }},
	}
	times, err := takeTurns(o.repeat, runs)
	if err != nil {
		return err
	}
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.name
	}
	reportThroughput(tw, comp, names, times, float64(o.samples), float64(payload), figs)
	return nil
}

// startRunning starts the running pipelines the measurement keeps across
// passes: with fresh and with recycled batch storage, and in any order,
// each after an untimed first pass. The caller closes those it returns,
// also with an error.
func startRunning(ctx context.Context, o benchOptions, path string) ([]*benchmark.Running, error) {
	var running []*benchmark.Running
	anyCfg := o.config(path)
	anyCfg.AnyOrder = true
	for _, start := range []func() (*benchmark.Running, error){
		func() (*benchmark.Running, error) { return o.config(path).Start(false, touch) },
		func() (*benchmark.Running, error) { return o.config(path).Start(true, touch) },
		func() (*benchmark.Running, error) { return anyCfg.Start(false, touch) },
	} {
		r, err := start()
		if err != nil {
			return running, err
		}
		running = append(running, r)
		if _, err := r.Pass(ctx); err != nil {
			return running, err
		}
	}
	return running, nil
}

// turn is one measurement of a run that takes turns with others.
type turn struct {
	name string
	run  func() error
}

// takeTurns times each run repeat times, taking turns (benchmark.TakeTurns).
func takeTurns(repeat int, runs []turn) (map[string][]time.Duration, error) {
	times := map[string][]time.Duration{}
	err := benchmark.TakeTurns(repeat, len(runs), func(r int) error {
		t := time.Now()
		if err := runs[r].run(); err != nil {
			return err
		}
		times[runs[r].name] = append(times[runs[r].name], time.Since(t))
		return nil
	})
	return times, err
}

// reportThroughput writes the rows of the runs named names, in that order,
// from their times: samples/s, MB/s and the ratios to the baselines.
func reportThroughput(tw io.Writer, comp recordio.Compressor, names []string, times map[string][]time.Duration, samples, payload float64, figs *benchFigures) {
	ch, cp := benchmark.Median(times[chRow]), benchmark.Median(times[copyRow])
	st, sr := benchmark.Median(times[stRow]), benchmark.Median(times[srRow])
	ratio := func(base, m time.Duration) string { return fmt.Sprintf("%.2f", base.Seconds()/m.Seconds()) }
	for _, name := range names {
		m := benchmark.Median(times[name])
		vsCh, vsSt, vsCp := "", "", ""
		switch name {
		case acRow, nwRow, aoRow: // against the baseline that, like it, makes fresh batches
			vsCh, vsSt, vsCp = ratio(ch, m), ratio(st, m), ratio(cp, m)
		case rcRow:
			vsCh, vsSt, vsCp = ratio(ch, m), ratio(sr, m), ratio(cp, m)
		case chRow, stRow, srRow:
			vsCp = ratio(cp, m)
		}
		fmt.Fprintf(tw, "%v\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t\n", comp, name, samples/m.Seconds(), payload/m.Seconds()/1e6, vsCh, vsSt, vsCp)
		if name != copyRow && name != readRow { // the bounds are two orders of magnitude above
			figs.throughput = append(figs.throughput, benchBar{file: comp.String(), what: name, samples: samples / m.Seconds()})
		}
	}
	fmt.Fprintf(tw, "%v\tactor pipeline in the order, vs any order\t\t\t\t%s\t\t\n", comp, ratio(benchmark.Median(times[aoRow]), benchmark.Median(times[acRow])))
}

// stacked is the stacked baseline's configuration.
func (o benchOptions) stacked(recycle bool) baseline.StackedOptions {
	return baseline.StackedOptions{Window: o.window, Batch: o.batch, Group: actors.DefaultGroupSize, GroupBytes: actors.DefaultGroupBytes, Seed: 1, Recycle: recycle}
}

// config is the measured pipeline over path.
func (o benchOptions) config(path string) benchmark.Config {
	return benchmark.Config{Path: path, Window: o.window, Batch: o.batch, Buffer: o.buffer, System: o.system}
}

// benchDevices measures what the device sees: the time to the first batch,
// busy fraction and waits, allocations per batch, and the heap over many
// passes.
func benchDevices(ctx context.Context, out io.Writer, path string, o benchOptions, figs *benchFigures) error {
	// The time to the first batch, at the batch size of the throughput
	// runs.
	var firsts []time.Duration
	for range o.repeat {
		_, first, err := o.config(path).Pass(ctx, false, func(tensor.Slots) {})
		if err != nil {
			return err
		}
		firsts = append(firsts, first)
	}
	// The busy measurement steps batches of --device-batch: a timer wakes
	// up to a millisecond late on this kind of machine, so only a step of a
	// few milliseconds is simulated faithfully.
	dev := o.config(path)
	dev.Batch = o.deviceBatch
	d, err := dev.Device(ctx, o.repeat)
	if err != nil {
		return err
	}
	from, to := benchmark.WarmPasses()
	figs.waits, figs.step, figs.deviceBatch = d.Waits, d.StepTaken, dev.Batch
	fmt.Fprintf(out, "\ndevice, batches of %d, double buffer %d: step %v asked (twice the pipeline's %v per batch), %v taken (%.1fx): busy %.1f%% once warm (passes %d-%d), longest wait at a warm pass boundary %v, p99 wait %v, mean wait %v\n",
		dev.Batch, o.buffer, d.StepAsked.Round(time.Microsecond), d.PerBatch.Round(time.Microsecond), d.StepTaken.Round(time.Microsecond),
		d.StepTaken.Seconds()/d.PerBatch.Seconds(), 100*d.Busy, from, to, d.Boundary.Round(time.Microsecond),
		percentile(d.Waits, 0.99).Round(time.Microsecond), benchmark.Mean(d.Waits).Round(100*time.Nanosecond))
	fmt.Fprintf(out, "first batch: %v after start (median of %d)\n", benchmark.Median(firsts).Round(10*time.Microsecond), len(firsts))

	// Allocations per batch and the heap over many passes, on one pipeline.
	m, err := o.config(path).Memory(ctx, o.passes, touch)
	if err != nil {
		return err
	}
	figs.heap = m.Heap
	mb := func(b uint64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
	sorted := slices.Clone(m.Heap)
	slices.Sort(sorted)
	fmt.Fprintf(out, "allocations: %.0f per batch of %d (passes 2-%d)\n", m.AllocsPerBatch, o.batch, o.passes)
	fmt.Fprintf(out, "heap in use after GC, %d passes: first %s, median %s, last %s, max %s; peak batches alive %d\n",
		o.passes, mb(m.Heap[0]), mb(sorted[len(sorted)/2]), mb(m.Heap[len(m.Heap)-1]), mb(sorted[len(sorted)-1]), m.PeakLive)
	return nil
}
