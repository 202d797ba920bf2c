package sim_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/program"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/supervisor"
)

// whatIfSpec is a program over paths: two readers, a shuffle, batches of
// 16 to two devices that take step each.
func whatIfSpec(t *testing.T, paths []string, step string, anyOrder bool) *program.Spec {
	t.Helper()
	spec, err := program.Parse(fmt.Appendf(nil, `startup:
  - op: open_files
    out: files
    attrs: {file_names: ["%s"], thread_num: 2, any_order: %v}
  - {op: create_shuffle_reader, in: files, out: shuffled, attrs: {buffer_size: 64, seed: 3}}
  - {op: create_batch_reader, in: shuffled, out: batches, attrs: {batch_size: 16}}
  - {op: create_double_buffer_reader, in: batches, out: reader}
devices: {n: 2, step: %s, passes: 2}
`, strings.Join(paths, `", "`), anyOrder, step))
	require.NoError(t, err)
	return spec
}

func schedule(t *testing.T, doc string) *sim.Schedule {
	t.Helper()
	s, err := sim.ParseSchedule([]byte(doc))
	require.NoError(t, err)
	return s
}

func TestWhatIfCountsWhatItsFaultsCost(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 300, 600)
	res, err := sim.WhatIf{
		Spec: whatIfSpec(t, paths, "1ms", true),
		Schedule: schedule(t, `faults:
  - {kind: flip-bytes, files: part-1.rio, at: 10} # the payload of chunk 4
  - {kind: short-read, files: part-0.rio, at: 3}
  - {kind: read-error, files: part-2.rio, at: 4}
  - {kind: latency, files: part-2.rio, dist: {fixed: 2ms}}
  - {kind: panic, stage: shuffle, at: 5}
  - {kind: slow-device, device: 1, dist: {fixed: 1ms}}
`),
		Seed: 1, Runs: 2, Baseline: true,
		Options: actors.Options{OnCorrupt: supervisor.SkipCorrupt, Retry: supervisor.Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, Attempts: 8}},
	}.Run(ctx)
	require.NoError(t, err)
	require.Len(t, res.Runs, 2)
	require.NotNil(t, res.Baseline)
	require.Equal(t, 1800, res.Baseline.Samples, "two passes of 900")
	for _, r := range res.Runs {
		require.Equal(t, sim.Pass, r.Verdict(), "%v", r.Violations)
		require.NoError(t, r.Err)
		require.Positive(t, r.Skipped, "the flipped chunk's records are skipped")
		require.Equal(t, 1800-int(r.Skipped), r.Samples, "every other sample, once per pass")
		require.Equal(t, int(r.Skipped), r.Missing)
		require.Positive(t, r.Restarts, "the shuffle's panic")
		by := r.Injected.ByKind
		require.Equal(t, 1, by[sim.FlipBytes])
		require.Equal(t, 1, by[sim.ShortRead])
		require.Equal(t, 1, by[sim.ReadError])
		require.Equal(t, 1, by[sim.StagePanic])
		require.Positive(t, by[sim.Latency])
		require.Equal(t, 56, by[sim.SlowDevice], "every step of device 1: 28 of each pass's 57 batches")
		require.Len(t, r.Devices, 2)
		require.Positive(t, r.Devices[0].Busy)
		require.LessOrEqual(t, r.PeakLiveBatches, r.Bound)
		require.NotEmpty(t, r.Series)
	}
	require.NotNil(t, res.Ratios)
	require.InDelta(t, res.Median.Throughput/res.Baseline.Throughput, res.Ratios.Throughput, 1e-9)
}

func TestWhatIfReportsATruncationAsTheRunsError(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 200, 600)
	res, err := sim.WhatIf{
		Spec:     whatIfSpec(t, paths, "0s", false),
		Schedule: schedule(t, "faults:\n  - {kind: truncate, files: part-1.rio, bytes: 100}\n"),
		Seed:     1, Runs: 1,
	}.Run(ctx)
	require.NoError(t, err)
	r := res.Runs[0]
	require.Equal(t, sim.Pass, r.Verdict(), "failing with a clear error keeps the promises: %v", r.Violations)
	var se *actors.StageError
	require.ErrorAs(t, r.Err, &se)
	require.Equal(t, paths[1], se.File)
	require.ErrorIs(t, r.Err, format.ErrCorrupt)
	require.Equal(t, 1, r.Injected.ByKind[sim.Truncate])
}

func TestWhatIfRefusesFaultsOnWhatTheProgramLacks(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 1, 50, 0)
	for _, tc := range []struct{ doc, want string }{
		{"faults:\n  - {kind: read-error, files: 'nothing-*.rio', at: 1}\n", "line 2: fault 1 (read-error): files: \"nothing-*.rio\" matches none of the program's 1 files"},
		{"faults:\n  - {kind: panic, stage: multi_pass, at: 1}\n", "line 2: fault 1 (panic): stage: the program has no multi_pass stage"},
		{"faults:\n  - {kind: panic-device, device: 2, at: 1}\n", "line 2: fault 1 (panic-device): devices: the program feeds 2 device(s)"},
	} {
		_, err := sim.WhatIf{Spec: whatIfSpec(t, paths, "0s", false), Schedule: schedule(t, tc.doc)}.Run(ctx)
		require.True(t, errors.Is(err, sim.ErrBadSchedule), "%v", err)
		require.Contains(t, err.Error(), tc.want)
	}
}

// The medians counted a failed run's zeros (a run that ended in an error
// at once has no throughput): they are the medians of the runs that ran
// to their end, and say how many.
func TestMediansLeaveOutRunsThatEndedInAnError(t *testing.T) {
	runs := []sim.RunReport{{Seed: 1, Throughput: 100}, {Seed: 2, Throughput: 200}, {Seed: 3, Err: errors.New("boom")}}
	m := sim.Summarize(runs)
	require.Equal(t, 3, m.Runs)
	require.Equal(t, 2, m.Measured)
	require.Equal(t, 1, m.Errors)
	require.InDelta(t, 150, m.Throughput, 1e-9)
	none := sim.Summarize(runs[2:])
	require.Zero(t, none.Measured)
}

// tfrecordFiles writes n TFRecord files of records Examples (id, label).
func tfrecordFiles(t *testing.T, n, records int) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for f := range n {
		var b bytes.Buffer
		w := tfrecord.NewWriter(&b)
		for r := range records {
			var x tfrecord.Example
			x.Int64("id", int64(f*1_000_000+r))
			x.Int64("label", int64(r%10))
			require.NoError(t, w.Write(x.Marshal()))
		}
		path := filepath.Join(dir, fmt.Sprintf("part-%d.tfrecord", f))
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		paths = append(paths, path)
	}
	return paths
}

// File faults strike TFRecord files as they do RecordIO files: a failed
// or short read is retried, and every sample arrives once a pass.
func TestWhatIfFaultsOnTFRecordFiles(t *testing.T) {
	ctx := testutil.Context(t)
	paths := tfrecordFiles(t, 2, 200)
	res, err := sim.WhatIf{
		Spec: whatIfSpec(t, paths, "0s", false),
		Schedule: schedule(t, `faults:
  - {kind: read-error, files: part-1.tfrecord, at: 3}
  - {kind: short-read, files: part-0.tfrecord, at: 2}
  - {kind: latency, files: part-1.tfrecord, dist: {fixed: 1ms}}
`),
		Seed: 1, Runs: 1,
		Options: actors.Options{Retry: supervisor.Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, Attempts: 8}},
	}.Run(ctx)
	require.NoError(t, err)
	r := res.Runs[0]
	require.Equal(t, sim.Pass, r.Verdict(), "%v", r.Violations)
	require.NoError(t, r.Err)
	require.Equal(t, 800, r.Samples, "two passes of 400")
	require.Equal(t, 1, r.Injected.ByKind[sim.ReadError])
	require.Equal(t, 1, r.Injected.ByKind[sim.ShortRead])
}
