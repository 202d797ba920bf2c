package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/actors/service"
	"github.com/actorfeed/actorfeed/internal/benchmark"
	"github.com/actorfeed/actorfeed/readers/recordio"
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
func runServiceBench(ctx context.Context, out io.Writer, o benchOptions) error {
	sizes, err := parseSizes(o.matrix.sizes)
	if err != nil {
		return usageError{err}
	}
	counts, err := parseWorkers(o.serviceWorkers)
	if err != nil {
		return usageError{err}
	}
	dir, err := os.MkdirTemp("", "actorfeed-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	workers, err := startBenchWorkers(ctx, slicesMax(counts), dir)
	defer stopBenchWorkers(workers)
	if err != nil {
		return err
	}
	node, err := service.Listen(service.Config{})
	if err != nil {
		return err
	}
	defer node.Close()
	fmt.Fprintf(out, "%d files, about %d MiB of samples per data set, uncompressed; shuffle %d, batch %d, %d devices that read every image byte; worker processes on loopback; %d runs each, medians; %s, %d CPUs\n\n",
		o.matrix.files, o.matrix.dataMB, o.window, o.batch, o.matrix.devices, o.repeat, runtime.Version(), runtime.NumCPU())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sample\twhat\tsamples/s\tGB/s\tvs in-process\t")
	for _, size := range sizes {
		sub := filepath.Join(dir, strconv.Itoa(size))
		payload := size + 8
		samples := max(o.matrix.files, o.matrix.dataMB<<20/payload)
		paths, err := synthetic{files: o.matrix.files, samples: samples, seed: 1, compressor: recordio.NoCompression, image: size}.write(ctx, sub)
		if err != nil {
			return err
		}
		base := benchmark.Config{Paths: paths, Window: o.window, Batch: o.batch, Buffer: o.buffer, Devices: o.matrix.devices, System: node.System()}
		rows := []struct {
			name string
			cfg  benchmark.Config
		}{{"actor pipeline, in process", base}}
		for _, k := range counts {
			c := base
			c.Service = &actors.Service{Workers: benchAddrs(workers[:k])}
			rows = append(rows, struct {
				name string
				cfg  benchmark.Config
			}{fmt.Sprintf("on %d worker process(es)", k), c})
		}
		times := map[string][]time.Duration{}
		for i := range o.repeat {
			for k := range rows {
				r := rows[(i+k)%len(rows)]
				runtime.GC()
				total, _, err := r.cfg.Pass(ctx, false, touch)
				if err != nil {
					return fmt.Errorf("%s: %w", r.name, err)
				}
				times[r.name] = append(times[r.name], total)
			}
		}
		local := benchmark.Median(times[rows[0].name])
		for _, r := range rows {
			t := benchmark.Median(times[r.name])
			rate := float64(samples) / t.Seconds()
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t\n", sizeText(size), r.name, rate, rate*float64(payload)/1e9, local.Seconds()/t.Seconds())
		}
		os.RemoveAll(sub)
	}
	return tw.Flush()
}

func slicesMax(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func sizeText(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	return strconv.Itoa(n)
}

// benchWorker is an actorfeed serve process the bench started.
type benchWorker struct {
	cmd  *exec.Cmd
	addr string
}

// startBenchWorkers starts k actorfeed serve processes on loopback serving
// files under root.
func startBenchWorkers(ctx context.Context, k int, root string) ([]*benchWorker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var ws []*benchWorker
	for range k {
		cmd := exec.CommandContext(ctx, self, "serve", "--listen", "127.0.0.1:0", "--root", root, "--progress-every", "1h")
		cmd.Env = os.Environ()
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return ws, err
		}
		if err := cmd.Start(); err != nil {
			return ws, fmt.Errorf("starting a worker: %w", err)
		}
		w := &benchWorker{cmd: cmd}
		ws = append(ws, w)
		line, err := bufio.NewReader(stdout).ReadString('\n')
		addr, ok := strings.CutPrefix(line, "serving on ")
		if err != nil || !ok {
			return ws, fmt.Errorf("a worker printed no address: %q", line)
		}
		w.addr, _, _ = strings.Cut(addr, ",")
		go io.Copy(io.Discard, stdout) //nolint:errcheck // its status lines
	}
	return ws, nil
}

func stopBenchWorkers(ws []*benchWorker) {
	for _, w := range ws {
		_ = w.cmd.Process.Signal(os.Interrupt)
		_ = w.cmd.Wait()
	}
}

func benchAddrs(ws []*benchWorker) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.addr)
	}
	return out
}
