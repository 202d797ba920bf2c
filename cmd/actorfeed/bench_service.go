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
	"text/tabwriter"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/harness/benchmark"
	"github.com/actorfeed/actorfeed/internal/serveproc"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/service"
)

// parseWorkers reads --service-workers: worker counts from 1 to 16.
func parseWorkers(list []string) ([]int, error) {
	var out []int
	for _, s := range list {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("--service-workers: %q: want a number of workers from 1 to 16", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// runServiceBench measures, for every sample size (uncompressed), the
// in-process actor pipeline and the same pipeline on worker processes
// (actorfeed serve on loopback, started here), taking turns, each a new
// pipeline per run.
func runServiceBench(ctx context.Context, out io.Writer, o benchOptions) (err error) {
	sizes, err := parseSizes(o.matrix.sizes)
	if err != nil {
		return usageError{err}
	}
	counts, err := parseWorkers(o.serviceWorkers)
	if err != nil {
		return usageError{err}
	}
	raiseHeapFloor() // this process is the client: its in-process rows run with the same floor
	dir, err := os.MkdirTemp("", "actorfeed-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	workers, err := startBenchWorkers(ctx, slices.Max(counts), dir)
	defer func() { err = errors.Join(err, stopBenchWorkers(workers)) }() // after the client's node
	if err != nil {
		return err
	}
	node, err := service.Listen(service.Config{})
	if err != nil {
		return err
	}
	defer node.Close()
	fmt.Fprintf(out, "%d files, about %d MiB of samples per data set, uncompressed; shuffle %d, batch %d, map %q; %d devices that read every image byte; worker processes on loopback; %d runs each, medians; %s, %d CPUs, %s\n\n",
		o.matrix.files, o.matrix.dataMB, o.window, o.batch, o.serviceMap, o.matrix.devices, o.repeat, runtime.Version(), runtime.NumCPU(), heapFloorNote())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sample\twhat\tsamples/s\tGB/s\tvs in-process\tCPU s per M samples\tCPU vs in-process\t")
	base := benchmark.Config{Window: o.window, Batch: o.batch, Buffer: o.buffer, Devices: o.matrix.devices, System: node.System()}
	if o.serviceMap != "" {
		fn, err := mapNamed(o.serviceMap)
		if err != nil {
			return usageError{err}
		}
		base.Map = &actors.Map{Fn: fn, Name: o.serviceMap}
	}
	for _, size := range sizes {
		if err := serviceBenchSize(ctx, tw, filepath.Join(dir, strconv.Itoa(size)), size, base, workers, counts, o); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// serviceBenchSize measures one sample size: the pipeline in process, on
// each count of workers, and the bytes alone through one loopback TCP
// connection (the ceiling of any worker's batches here), taking turns,
// and writes their rows.
func serviceBenchSize(ctx context.Context, tw io.Writer, dir string, size int, base benchmark.Config, workers []*serveproc.Process, counts []int,
	o benchOptions) error {
	defer os.RemoveAll(dir)
	payload := size + 8
	samples := max(o.matrix.files, o.matrix.dataMB<<20/payload)
	paths, err := synthetic{files: o.matrix.files, samples: samples, seed: 1, compressor: recordio.NoCompression, image: size}.write(ctx, dir)
	if err != nil {
		return err
	}
	base.Paths = paths
	pass := func(c benchmark.Config) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			total, _, err := c.Pass(ctx, false, touch)
			return total, err
		}
	}
	names, runs := []string{"actor pipeline, in process"}, []func() (time.Duration, error){pass(base)}
	for _, k := range counts {
		c := base
		c.Service = &actors.Service{Workers: benchAddrs(workers[:k])}
		names, runs = append(names, fmt.Sprintf("on %d worker process(es)", k)), append(runs, pass(c))
	}
	names, runs = append(names, "loopback TCP, the bytes alone"), append(runs, func() (time.Duration, error) {
		rate, err := benchmark.Loopback(ctx, int64(samples*payload))
		return time.Duration(float64(samples*payload) / rate * float64(time.Second)), err
	})
	times, cpu := make([][]time.Duration, len(runs)), make([]time.Duration, len(runs))
	err = benchmark.TakeTurns(o.repeat, len(runs), func(r int) error {
		before := benchCPU(workers)
		total, err := runs[r]()
		if err != nil {
			return fmt.Errorf("%s: %w", names[r], err)
		}
		times[r], cpu[r] = append(times[r], total), cpu[r]+benchCPU(workers)-before
		return nil
	})
	if err != nil {
		return err
	}
	local := benchmark.Median(times[0])
	perM := func(r int) float64 { return cpu[r].Seconds() / float64(o.repeat) / float64(samples) * 1e6 }
	for r, name := range names {
		t := benchmark.Median(times[r])
		rate := float64(samples) / t.Seconds()
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", sizeName(size), name, rate, rate*float64(payload)/1e9, local.Seconds()/t.Seconds(),
			perM(r), perM(r)/perM(0))
	}
	return nil
}

// benchCPU is the CPU time of this process and of the worker processes:
// the machine's work for a run, wherever it ran, idle workers' included.
func benchCPU(workers []*serveproc.Process) time.Duration {
	t := benchmark.CPUTime()
	for _, w := range workers {
		t += benchmark.ProcessCPUTime(w.Pid())
	}
	return t
}

// Bounds of a bench worker's start and stop.
const (
	benchWorkerStart = 10 * time.Second
	benchWorkerStop  = 30 * time.Second
)

// startBenchWorkers starts k actorfeed serve processes on loopback serving
// files under root.
func startBenchWorkers(ctx context.Context, k int, root string) ([]*serveproc.Process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var ws []*serveproc.Process
	for range k {
		w, err := serveproc.Start(ctx, []string{self, "serve", "--listen", "127.0.0.1:0", "--root", root, "--progress-every", "1h"}, benchWorkerStart)
		if err != nil {
			return ws, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// stopBenchWorkers stops the workers, and says which did not stop cleanly.
func stopBenchWorkers(ws []*serveproc.Process) error {
	var errs []error
	for _, w := range ws {
		errs = append(errs, w.Stop(benchWorkerStop))
	}
	return errors.Join(errs...)
}

func benchAddrs(ws []*serveproc.Process) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Addr)
	}
	return out
}
