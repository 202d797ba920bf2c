package main

import (
	"bytes"
	"errors"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/service"
	"github.com/actorfeed/actorfeed/sim"
)

func TestMetricsAreServedOnLoopback(t *testing.T) {
	addr, err := loopback(":9100", false)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9100", addr, "a bare port listens on loopback only")
	// 0.0.0.0 listened on every interface silently: it takes --metrics-expose.
	_, err = loopback("0.0.0.0:9100", false)
	require.ErrorContains(t, err, "--metrics-expose")
	addr, err = loopback("0.0.0.0:9100", true)
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9100", addr)
	_, err = loopback("9100", false)
	require.ErrorContains(t, err, "host:port")
	_, err = loopback("127.0.0.1:abc", false)
	require.ErrorContains(t, err, "bad port")

	dir := t.TempDir()
	s := synthetic{files: 2, samples: 400, seed: 1}
	paths, err := s.write(t.Context(), dir)
	require.NoError(t, err)
	sys := actors.NewSystem()
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 20}}, actors.Devices{N: 2}, actors.Options{System: sys})
	require.NoError(t, err)
	require.NoError(t, p.Run(t.Context()))
	body := scrape(t, p)
	for _, want := range []string{
		`actorfeed_stage_items_total{kind="double_buffer",stage="2-double_buffer"} 20`,
		`actorfeed_stage_items_total{kind="batch",stage="1-batch"}`,
		`actorfeed_stage_buffered_items{kind="batch",stage="1-batch"}`,
		`actorfeed_stage_outstanding_demand{kind="double_buffer",stage="2-double_buffer"}`,
		`actorfeed_stage_restarts_total{kind="open_files",stage="0-open_files"} 0`,
		`actorfeed_device_samples_total{device="0"} 200`,
		`actorfeed_device_busy_seconds_total{device="1"}`,
	} {
		require.Contains(t, string(body), want)
	}
	require.NotContains(t, string(body), "go_goroutines", "a private registry: only the pipeline's metrics")
	require.NoError(t, p.Close())
	require.Empty(t, registered.Actors(sys))
}

// A service's workers have metrics of their own, and are machines of their
// own in the actor tree (a worker in the pipeline's system here: no
// network, so that the race detector runs).
func TestServiceWorkersAreObserved(t *testing.T) {
	dir := t.TempDir()
	s := synthetic{files: 2, samples: 400, seed: 1}
	paths, err := s.write(t.Context(), dir)
	require.NoError(t, err)
	sys := actors.NewSystem()
	defer sys.Shutdown()
	w, err := service.StartWorker(sys, service.WorkerOptions{Roots: []string{dir}})
	require.NoError(t, err)
	p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Batch{Size: 20}}, actors.Devices{N: 2},
		actors.Options{System: sys, Service: &actors.Service{Workers: []string{sys.Address()}}})
	require.NoError(t, err)
	require.NoError(t, p.Run(t.Context()))
	body := scrape(t, p)
	for _, want := range []string{
		`actorfeed_service_worker_batches_total{worker="nonhost"} 20`,
		`actorfeed_service_worker_tasks_total{worker="nonhost"} 1`,
		`actorfeed_service_worker_lost_total{worker="nonhost"} 0`,
		`actorfeed_service_worker_alive{worker="nonhost"} 1`,
		`actorfeed_service_worker_reassigned_total{worker="nonhost"} 0`,
		`actorfeed_service_worker_credit{worker="nonhost"} 0`,
		`actorfeed_stage_items_total{kind="service",stage="1-service"} 20`,
	} {
		require.Contains(t, string(body), want)
	}
	dot := treeDOT(p.StageStats(), p.ServiceWorkers())
	require.Contains(t, dot, `"worker nonhost" -> "1-service" [style=dotted`)
	require.Contains(t, dot, "1 tasks, 20 batches, reassigned 0, lost 0, alive")
	// actors.png draws the worker as a row of its own below the stages.
	alone, err := drawTree(filepath.Join(dir, "alone.png"), p.StageStats(), nil)
	require.NoError(t, err)
	with, err := drawTree(filepath.Join(dir, "with.png"), p.StageStats(), p.ServiceWorkers())
	require.NoError(t, err)
	require.Greater(t, pngHeight(t, with), pngHeight(t, alone))
	require.NoError(t, p.Close())
	require.NoError(t, w.Close())
	require.Empty(t, registered.Actors(sys))
}

// scrape serves p's metrics on loopback and reads them once.
func scrape(t *testing.T, p *actors.Pipeline) []byte {
	t.Helper()
	m, err := serveMetrics("127.0.0.1:0", false, func() *actors.Pipeline { return p })
	require.NoError(t, err)
	resp, err := http.Get("http://" + m.addr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.NoError(t, m.stop())
	return body
}

func TestRunWritesReport(t *testing.T) {
	dir := genSet(t, 2, 2000)
	rep := filepath.Join(dir, "report")
	out, err := cli(t, "run", "--data", filepath.Join(dir, "*.recordio"), "--devices", "2", "--step", "1ms",
		"--report", rep, "--sample-every", "5ms", "--metrics-addr", "127.0.0.1:0")
	require.NoError(t, err)
	require.Contains(t, out, "report: ")
	require.Contains(t, out, "metrics were served at http://127.0.0.1:")
	for _, name := range []string{"throughput.png", "devices.png", "buffers.png", "actors.png"} {
		data, err := os.ReadFile(filepath.Join(rep, name))
		require.NoError(t, err, name)
		require.True(t, bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")), "%s is a PNG", name)
	}
	dot, err := os.ReadFile(filepath.Join(rep, "actors.dot"))
	require.NoError(t, err)
	for _, want := range []string{"supervisor -> \"2-batch\"", "\"0-open_files/reader-0\" -> \"0-open_files\"", "\"3-double_buffer\" -> \"device-1\""} {
		require.Contains(t, string(dot), want)
	}
}

// The pictures read without the docs: throughput's axis starts at 0;
// buffers.png has a panel per unit, a colour per stage and room above the
// data for its legend (it covered the data, colours repeated past seven
// stages, and groups and batches shared one axis).
func TestReportPicturesAreReadable(t *testing.T) {
	var stages []actors.StageStats
	for _, st := range []struct{ name, kind string }{
		{"0-open_files/reader-0", actors.KindFileReader}, {"0-open_files/reader-1", actors.KindFileReader},
		{"0-open_files", actors.KindFiles}, {"1-shuffle", actors.KindShuffle}, {"2-batch", actors.KindBatch},
		{"3-double_buffer", actors.KindDoubleBuffer}, {"device-0", actors.KindDevice}, {"device-1", actors.KindDevice},
	} {
		stages = append(stages, actors.StageStats{Stage: st.name, Kind: st.kind})
	}
	var series []sample
	for i := range 10 {
		held := map[string]int{}
		for k, st := range stages {
			held[st.Stage] = (i * (k + 1)) % 9
		}
		series = append(series, sample{at: time.Duration(i) * 100 * time.Millisecond, samples: 50000 + i*5000, held: held})
	}
	tp, err := throughputPlot(series)
	require.NoError(t, err)
	require.Zero(t, tp.Y.Min, "the throughput axis starts at 0")

	panels, err := bufferPlots(series, stages)
	require.NoError(t, err)
	require.Len(t, panels, 2)
	require.Equal(t, "groups of samples", panels[0].Y.Label.Text)
	require.Equal(t, "batches", panels[1].Y.Label.Text)
	for _, p := range panels {
		require.Greater(t, p.Y.Max, 8*(1.15+0.12*3)-0.01, "room above the data (at most 8) for the legend")
	}
	// With a service, the workers batch: its stage holds batches, and
	// nothing holds groups of samples (the panel labelled the service,
	// double buffer and devices "groups of samples before the batch
	// stage").
	svc := []actors.StageStats{{Stage: "0-service", Kind: actors.KindService}, {Stage: "1-double_buffer", Kind: actors.KindDoubleBuffer},
		{Stage: "device-0", Kind: actors.KindDevice}}
	panels, err = bufferPlots(series, svc)
	require.NoError(t, err)
	require.Len(t, panels, 1)
	require.Equal(t, "batches", panels[0].Y.Label.Text)
	for n := 1; n <= 16; n++ {
		colours := map[color.Color]bool{}
		for k := range n {
			c := seriesColor(k, n)
			require.False(t, colours[c], "a colour of its own for series %d of %d", k, n)
			colours[c] = true
		}
	}
}

// pngHeight is the height of the PNG image at path.
func pngHeight(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	require.NoError(t, err)
	return cfg.Height
}

// A what-if run's picture has a legend for the run, the baseline and the
// faults' windows (it had none); a run that failed at once gets no
// picture (it had empty axes).
func TestWhatIfPicturesSayWhatTheyShow(t *testing.T) {
	series := func(rate int) []sim.Point {
		var ps []sim.Point
		for i := range 5 {
			ps = append(ps, sim.Point{At: time.Duration(i) * 100 * time.Millisecond, Samples: i * rate, Busy: []time.Duration{time.Duration(i) * 50 * time.Millisecond}})
		}
		return ps
	}
	base := sim.RunReport{Seed: 1, Series: series(100)}
	run := sim.RunReport{Seed: 1, Faults: true, Series: series(80), Elapsed: 400 * time.Millisecond,
		Windows: []sim.Window{{From: 100 * time.Millisecond, Until: 200 * time.Millisecond}}}
	pic, err := runPlots(run, &base)
	require.NoError(t, err)
	require.Len(t, pic.plots, 2)
	require.Equal(t, []string{"this run", "baseline (no faults)", "a fault's window"}, pic.legend)

	failed := sim.RunReport{Seed: 2, Faults: true, Err: errors.New("boom")}
	pic, err = runPlots(failed, &base)
	require.NoError(t, err)
	require.Nil(t, pic)
	dir := t.TempDir()
	written, err := drawWhatIf(dir, &sim.WhatIfResult{Runs: []sim.RunReport{run, failed}, Baseline: &base})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "baseline.png"), filepath.Join(dir, "run-1.png")}, written)
}
