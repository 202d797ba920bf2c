package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
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
	m, err := serveMetrics("127.0.0.1:0", false, func() *actors.Pipeline { return p })
	require.NoError(t, err)
	resp, err := http.Get("http://" + m.addr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.NoError(t, m.stop())
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
