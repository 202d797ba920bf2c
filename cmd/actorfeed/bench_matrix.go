package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/baseline"
	"github.com/actorfeed/actorfeed/internal/harness/benchmark"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// matrixOptions are bench's matrix of sample sizes and core counts.
type matrixOptions struct {
	sizes, procs   []string // as given; parsed by parseSizes and parseProcs
	files, devices int
	dataMB         int
	device         string // sim, or cuda: the actor pipeline feeds the GPUs
	gpus           *gpus
	gpuLines       *[]string // what the GPUs took, a line per cell
}

func (m *matrixOptions) flags(f *pflag.FlagSet) {
	f.StringSliceVar(&m.sizes, "sizes", nil, "run the matrix instead: sample sizes in bytes, as 784,16K,150K (K and M are 1024 and 1024*1024)")
	f.StringSliceVar(&m.procs, "procs", nil, "run the matrix instead: GOMAXPROCS values, as 1,2,all (default the current)")
	f.IntVar(&m.files, "files", 16, "matrix: files of each data set")
	f.IntVar(&m.devices, "devices", 4, "matrix: devices, each reading every image byte of its batches")
	f.IntVar(&m.dataMB, "data-mb", 256, "matrix: MiB of samples in each data set (at least one sample a file)")
	f.StringVar(&m.device, "device", "sim", "matrix: sim (devices read every image byte), or cuda (the actor pipeline's devices copy their batches to the GPUs, made in page-locked memory)")
}

// asked says whether the command line asks for the matrix, and fills in
// the one of --sizes and --procs it left out.
func (m *matrixOptions) asked(f *pflag.FlagSet) bool {
	sizes, procs := f.Changed("sizes"), f.Changed("procs")
	if !sizes && procs {
		m.sizes = []string{"784"}
	}
	if sizes && !procs {
		m.procs = []string{strconv.Itoa(runtime.GOMAXPROCS(0))}
	}
	return sizes || procs
}

// maxSampleBytes bounds --sizes: a sample is one record, and one record must
// fit a chunk of the writer's default size many times over.
const maxSampleBytes = 16 << 20

// parseSizes reads sample sizes in bytes: a number with an optional K or M
// suffix (1024 and 1024*1024), as 784,16K,150K.
func parseSizes(list []string) ([]int, error) {
	var out []int
	for _, s := range list {
		t, mult := strings.TrimSpace(s), 1
		switch {
		case strings.HasSuffix(t, "K"):
			t, mult = strings.TrimSuffix(t, "K"), 1<<10
		case strings.HasSuffix(t, "M"):
			t, mult = strings.TrimSuffix(t, "M"), 1<<20
		}
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > maxSampleBytes/mult {
			return nil, fmt.Errorf("--sizes: %q: want a size from 1 to 16M bytes, as 784, 16K or 150K", s)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// parseProcs reads GOMAXPROCS values: numbers from 1 to the machine's CPUs,
// or "all" for all of them; sorted, each once.
func parseProcs(list []string) ([]int, error) {
	var out []int
	for _, s := range list {
		t := strings.TrimSpace(s)
		if t == "all" {
			out = append(out, runtime.NumCPU())
			continue
		}
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > runtime.NumCPU() {
			return nil, fmt.Errorf("--procs: %q: want a number from 1 to this machine's %d CPUs, or all", s, runtime.NumCPU())
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// The rows of a cell of the matrix.
const (
	mxRead     = "plain read of the files"
	mxParallel = "channel pipeline, a lane per core"
	mxOneLane  = "actor pipeline, one lane"
	mxActors   = "actor pipeline, a lane per core"
)

// cellResult is what one cell measured: each row's median time, and its
// CPU time over all its runs.
type cellResult struct {
	procs, runs int
	times       map[string]time.Duration
	cpu         map[string]time.Duration
}

// runMatrix measures, for every sample size, uncompressed and snappy, and
// every GOMAXPROCS of o.procs: the plain read of the files, the parallel
// channel baseline with one lane per core, and the actor pipeline with one
// lane and with one lane per core.
func runMatrix(ctx context.Context, out io.Writer, o benchOptions) error {
	sizes, err := parseSizes(o.matrix.sizes)
	if err != nil {
		return usageError{err}
	}
	procs, err := parseProcs(o.matrix.procs)
	if err != nil {
		return usageError{err}
	}
	switch o.matrix.device {
	case "sim":
	case "cuda":
		if o.matrix.gpus, err = openGPUs(o.matrix.devices); err != nil {
			return err
		}
		defer o.matrix.gpus.close()
		o.matrix.gpuLines = new([]string)
	default:
		return usageError{fmt.Errorf("--device %q: want sim or cuda", o.matrix.device)}
	}
	dir, err := os.MkdirTemp("", "actorfeed-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sys := actors.NewSystem()
	defer sys.Shutdown()
	o.system = sys
	fmt.Fprintf(out, "%d files, about %d MiB of samples per data set; shuffle %d, batch %d, %d devices that read every image byte; %d runs each, medians; %s, %d CPUs\n\n",
		o.matrix.files, o.matrix.dataMB, o.window, o.batch, o.matrix.devices, o.repeat, runtime.Version(), runtime.NumCPU())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sample\tfile\tprocs\twhat\tsamples/s\tGB/s\tvs read\tvs parallel\tvs fewest procs\tCPU s per M samples\t")
	for _, size := range sizes {
		for _, comp := range []recordio.Compressor{recordio.NoCompression, recordio.Snappy} {
			if err := matrixDataSet(ctx, tw, filepath.Join(dir, fmt.Sprintf("%d-%v", size, comp)), size, comp, procs, o); err != nil {
				return err
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if lines := o.matrix.gpuLines; lines != nil {
		for _, line := range *lines {
			fmt.Fprintln(out, line)
		}
	}
	return nil
}

// matrixDataSet writes the data set of one sample size and compressor, runs
// its cells and writes their rows; the files are removed after.
func matrixDataSet(ctx context.Context, tw io.Writer, dir string, size int, comp recordio.Compressor, procs []int, o benchOptions) error {
	defer os.RemoveAll(dir)
	payload := size + 8 // the image and its int64 label
	samples := max(o.matrix.files, o.matrix.dataMB<<20/payload)
	paths, err := synthetic{files: o.matrix.files, samples: samples, seed: 1, compressor: comp, image: size}.write(ctx, dir)
	if err != nil {
		return err
	}
	var cells []cellResult
	for _, p := range procs {
		c, err := matrixCell(ctx, paths, p, samples, o)
		if err != nil {
			return err
		}
		cells = append(cells, c)
	}
	var fileBytes int64
	for _, path := range paths {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		fileBytes += st.Size()
	}
	reportMatrix(tw, dataSet{size: size, comp: comp, samples: float64(samples), payload: float64(payload), fileBytes: float64(fileBytes)}, cells)
	return nil
}

// matrixCell measures the rows at GOMAXPROCS p, taking turns, each from a
// collected heap: the actor pipeline with one lane, and with a lane per
// core (Options.Lanes), as the baseline has. It is a new one for each
// run, as the baseline is: a running pipeline reads the next pass ahead while its
// devices drain the last, which in a pass of a few dozen large batches
// would hide a third of the work (and its CPU time) outside the run.
func matrixCell(ctx context.Context, paths []string, p, samples int, o benchOptions) (cellResult, error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
	one := benchmark.Config{Paths: paths, Window: o.window, Batch: o.batch, Buffer: o.buffer, System: o.system, Devices: o.matrix.devices}
	if g := o.matrix.gpus; g != nil {
		one.Step, one.Storage = g.step, g.storage()
	}
	lanes := one
	lanes.Lanes = p
	par := baseline.ParallelOptions{StackedOptions: o.stacked(false), Lanes: p, Devices: o.matrix.devices}
	runs := []struct {
		name string
		run  func() (int, error)
	}{
		{mxRead, func() (int, error) { return samples, readAll(paths, p) }},
		{mxParallel, func() (int, error) {
			return baseline.Parallel(ctx, paths, par, func(_ int, b tensor.Slots) { touch(b) })
		}},
		{mxOneLane, func() (int, error) { _, _, err := one.Pass(ctx, false, touch); return samples, err }},
		{mxActors, func() (int, error) { _, _, err := lanes.Pass(ctx, false, touch); return samples, err }},
	}
	c := cellResult{procs: p, runs: o.repeat, times: map[string]time.Duration{}, cpu: map[string]time.Duration{}}
	var gpuBefore gpuCounts
	if g := o.matrix.gpus; g != nil {
		gpuBefore = g.counts()
	}
	times := map[string][]time.Duration{}
	err := benchmark.TakeTurns(o.repeat, len(runs), func(k int) error {
		r := runs[k]
		t, cpu := time.Now(), benchmark.CPUTime()
		n, err := r.run()
		if err != nil {
			return fmt.Errorf("%s at GOMAXPROCS %d: %w", r.name, p, err)
		}
		if n != samples {
			return fmt.Errorf("%s at GOMAXPROCS %d: %d samples of %d", r.name, p, n, samples)
		}
		times[r.name] = append(times[r.name], time.Since(t))
		c.cpu[r.name] += benchmark.CPUTime() - cpu
		return nil
	})
	if err != nil {
		return c, err
	}
	if g := o.matrix.gpus; g != nil {
		line, err := g.cellLine(fmt.Sprintf("%s at GOMAXPROCS %d", filepath.Base(filepath.Dir(paths[0])), p), gpuBefore, times[mxOneLane], times[mxActors])
		if err != nil {
			return c, err
		}
		*o.matrix.gpuLines = append(*o.matrix.gpuLines, line)
	}
	for name, ts := range times {
		c.times[name] = benchmark.Median(ts)
	}
	return c, nil
}

// readAll reads the files with min(procs, files) goroutines, a file at a
// time each, in blocks of 1 MiB: what the machine's page cache gives that
// many cores.
func readAll(paths []string, procs int) error {
	next := make(chan string, len(paths))
	for _, p := range paths {
		next <- p
	}
	close(next)
	errs := make([]error, min(procs, len(paths)))
	var wg sync.WaitGroup
	for g := range errs {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for path := range next {
				if errs[g] = readFile(path, buf); errs[g] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// readFile reads path through buf, discarding the bytes.
func readFile(path string, buf []byte) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	for off := int64(0); ; off += int64(len(buf)) {
		n, err := fh.ReadAt(buf, off)
		if errors.Is(err, io.EOF) || n == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// dataSet describes the data set of a matrix's rows.
type dataSet struct {
	size             int // image bytes
	comp             recordio.Compressor
	samples, payload float64 // samples, and bytes a sample decoded
	fileBytes        float64
}

// reportMatrix writes the rows of one data set's cells: GB/s are decoded
// bytes a second, the files' bytes for the plain read; CPU seconds are the
// process's, user and system, per million samples.
func reportMatrix(tw io.Writer, ds dataSet, cells []cellResult) {
	ratio := func(base, m time.Duration) string { return fmt.Sprintf("%.2f", base.Seconds()/m.Seconds()) }
	first := cells[0]
	for _, c := range cells {
		for _, name := range []string{mxRead, mxParallel, mxOneLane, mxActors} {
			m := c.times[name]
			vsRead, vsPar, vsFirst := "", "", ""
			if name != mxRead {
				vsRead, vsFirst = ratio(c.times[mxRead], m), ratio(first.times[name], m)
			}
			if name == mxActors || name == mxOneLane {
				vsPar = ratio(c.times[mxParallel], m)
			}
			bytes := ds.samples * ds.payload
			if name == mxRead {
				bytes = ds.fileBytes
			}
			cpu := c.cpu[name].Seconds() / float64(c.runs) / (ds.samples / 1e6)
			fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%.0f\t%.2f\t%s\t%s\t%s\t%.2f\t\n", sizeName(ds.size), ds.comp, c.procs, name,
				ds.samples/m.Seconds(), bytes/m.Seconds()/1e9, vsRead, vsPar, vsFirst, cpu)
		}
	}
}

// sizeName writes a sample size as --sizes reads it.
func sizeName(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.Itoa(n)
}
