package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors/cuda"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// readIDs checks an --emit-ids file on its own: every line well formed,
// every epoch holding each of the want ids exactly once, each device's
// seqs in order and, in the first epoch of each pass of per epochs, its own
// lane (seq mod devices; the next epochs go on from where it ended).
func readIDs(t *testing.T, path string, epochs, per, devices int, want []string) {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	perPass := make([][]string, epochs)
	lastSeq := map[[2]int]int{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line idLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		pass := int(line.Epoch)
		require.Less(t, pass, epochs)
		if pass%per == 0 {
			require.Equal(t, line.Seq%devices, line.Device, "item k goes to device k mod n")
		}
		key := [2]int{pass, line.Device}
		if last, ok := lastSeq[key]; ok {
			require.Greater(t, line.Seq, last, "a device steps its items in order")
		}
		lastSeq[key] = line.Seq
		perPass[pass] = append(perPass[pass], line.IDs...)
	}
	require.NoError(t, sc.Err())
	sort.Strings(want)
	for pass, got := range perPass {
		sort.Strings(got)
		require.Equal(t, want, got, "pass %d: each sample exactly once", pass)
	}
}

func genIDs(files, samples int) []string {
	var ids []string
	for f := range files {
		n := samples / files
		if f < samples%files {
			n++
		}
		for r := range n {
			ids = append(ids, fmt.Sprintf("%s#%d", fileName(f), r))
		}
	}
	return ids
}

func TestGenRunEmitIDsExactlyOnce(t *testing.T) {
	dir := genSet(t, 3, 2000)
	ids := filepath.Join(dir, "ids.jsonl")
	out, err := cli(t, "run", "--data", filepath.Join(dir, "*.recordio"), "--batch", "50", "--shuffle", "300",
		"--devices", "3", "--passes", "2", "--threads", "2", "--emit-ids", ids, "--step", "1ms", "--progress-every", "1ms")
	require.NoError(t, err)
	require.Contains(t, out, "progress: pass ", "plain progress lines when not on a terminal")
	require.Contains(t, out, "4000 samples in 80 batches, 2 pass(es)")
	require.Contains(t, out, "data wait p95")
	readIDs(t, ids, 2, 1, 3, genIDs(3, 2000))
}

// Lanes spread the work over the cores, and every device gets the same
// batches in the same order on 1, 2 or 3 lanes: the --emit-ids lines,
// sorted by epoch and seq, are the same.
func TestRunLanesEmitTheSameBatches(t *testing.T) {
	// 1 MiB chunks of 1,300 samples: a lane's stretch is eight of them, so
	// 30,000 samples make three stretches.
	dir := genSet(t, 3, 30000)
	var want []idLine
	for _, lanes := range []string{"1", "2", "3"} {
		ids := filepath.Join(t.TempDir(), "ids.jsonl")
		out, err := cli(t, "run", "--data", filepath.Join(dir, "*.recordio"), "--batch", "500", "--shuffle", "1000",
			"--devices", "3", "--passes", "2", "--lanes", lanes, "--emit-ids", ids)
		require.NoError(t, err)
		if lanes != "1" {
			require.Contains(t, out, "in "+lanes+" lanes on ", "the run says it runs in lanes")
		}
		got := idLines(t, ids)
		slices.SortFunc(got, func(a, b idLine) int { return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Seq, b.Seq)) })
		require.Equal(t, 2*30000/500, len(got), "batches of 2 passes")
		if want == nil {
			want = got
			continue
		}
		require.True(t, slices.EqualFunc(want, got, func(a, b idLine) bool {
			return a.Epoch == b.Epoch && a.Seq == b.Seq && a.Device == b.Device && slices.Equal(a.IDs, b.IDs)
		}), "%s lanes: the batches differ", lanes)
	}
}

func TestRunSpec(t *testing.T) {
	dir := genSet(t, 2, 600)
	spec := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(fmt.Sprintf(`startup:
  - op: open_files
    out: files
    attrs:
      file_names: [%s, %s]
      shapes: [[1, 28, 28], [1]]
      dtypes: [uint8, int64]
  - {op: create_shuffle_reader, in: files, out: shuffled, attrs: {buffer_size: 128, seed: 3}}
  - {op: create_batch_reader, in: shuffled, out: batches, attrs: {batch_size: 32}}
  - {op: create_multi_pass_reader, in: batches, out: passes, attrs: {pass_num: 2}}
  - {op: create_double_buffer_reader, in: passes, out: reader}
devices: {n: 2, step: 1ms}
`, filepath.Join(dir, fileName(0)), filepath.Join(dir, fileName(1)))), 0o644))
	ids := filepath.Join(dir, "ids.jsonl")
	out, err := cli(t, "run", "--spec", spec, "--emit-ids", ids)
	require.NoError(t, err)
	require.Contains(t, out, "multi_pass(2)")
	require.Contains(t, out, "1200 samples")
	// The multi-pass reader serves its 2 passes, epochs 0 and 1, as one
	// pass of the run.
	readIDs(t, ids, 2, 2, 2, genIDs(2, 600))
}

func TestRunBadInput(t *testing.T) {
	dir := genSet(t, 1, 500, "--compressor", "none")
	data, err := os.ReadFile(filepath.Join(dir, fileName(0)))
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	corrupt := filepath.Join(dir, "corrupt.recordio")
	require.NoError(t, os.WriteFile(corrupt, data, 0o644))
	badYAML := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(badYAML, []byte("startup:\n  - {op: open_files, out: f, attrs: {file_names: [x.rio], thread: 2}}\n"), 0o644))
	notYAML := filepath.Join(dir, "not.yaml")
	require.NoError(t, os.WriteFile(notYAML, []byte("startup: [\n"), 0o644))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "--data"},
		{[]string{"run", "--data", filepath.Join(dir, "missing.recordio")}, "no such file"},
		{[]string{"run", "--data", filepath.Join(dir, "nothing-*.rio")}, "matches no file"},
		{[]string{"run", "--data", corrupt}, "corrupt"},
		{[]string{"run", "--data", corrupt, "--on-corrupt", "ignore"}, "--on-corrupt"},
		{[]string{"run", "--data", corrupt, "--batch", "0"}, "--batch"},
		{[]string{"run", "--data", corrupt, "--bogus"}, "bogus"},
		{[]string{"run", "--spec", badYAML}, "attribute thread"},
		{[]string{"run", "--spec", notYAML}, "program: spec"},
		{[]string{"run", "--spec", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{"run", "--data", corrupt, "--devices", "9223372036854775807"}, "--devices 9223372036854775807 is out of range"},
		{[]string{"run", "--data", corrupt, "--shuffle", "9223372036854775806"}, "--shuffle 9223372036854775806 is out of range"},
		{[]string{"run", "--data", corrupt, "--threads", "100000"}, "--threads 100000 is out of range"},
		{[]string{"run", "--data", corrupt, "--emit-ids", corrupt}, "the output is one of the inputs"},
		{[]string{"run", "--data", "recordio:/dev/zero"}, "not a regular file"},
		{[]string{"run", "--data", "recordio:/proc/self/environ"}, "its size reads 0 but it holds bytes"}, // it ran as an empty data set
		{[]string{"sim", "--parallel", "1000000"}, "--parallel 1000000"},
		{[]string{"gen", "--out", filepath.Join(dir, "huge"), "--samples", "1099511627776"}, "samples take about"}, // it began writing 874 TB
		{[]string{"run", "--data", corrupt, "--metrics-addr", "0.0.0.0:9100"}, "--metrics-expose"},
		{[]string{"run", "--data", corrupt, "--metrics-addr", "abc"}, "host:port"},
	} {
		_, err := cli(t, tc.args...)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
	// The address bound is printed, also for port 0.
	out, err := cli(t, "run", "--data", filepath.Join(dir, fileName(0)), "--metrics-addr", "127.0.0.1:0")
	require.NoError(t, err)
	require.Regexp(t, `metrics: http://127\.0\.0\.1:[1-9][0-9]*/metrics`, out)
	// Under the skip policy the run succeeds and counts what it skipped: the
	// file's one chunk fails its checksum, so all its 500 records.
	out, err = cli(t, "run", "--data", corrupt, "--on-corrupt", "skip")
	require.NoError(t, err)
	require.Contains(t, out, "0 samples in 0 batches")
	require.Contains(t, out, "skipped records 500 ")
}

// docs/programs.md's first example (main: passes: 3) ran 1 pass; its
// relative paths resolved against the current directory, not the spec's.
func TestRunSpecTakesMainPassesAndResolvesPathsAgainstTheSpec(t *testing.T) {
	dir := genSet(t, 2, 300)
	spec := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`startup:
  - {op: open_files, out: files, attrs: {file_names: [part-00000.recordio, "recordio:part-00001.recordio"]}}
  - {op: create_batch_reader, in: files, out: batches, attrs: {batch_size: 50}}
  - {op: create_double_buffer_reader, in: batches, out: reader}
main:
  passes: 3
  ops:
    - {op: read, in: reader, out: [image, label]}
`), 0o644))
	out, _, code := execCLI(t, t.TempDir(), "run", "--spec", spec) // run from elsewhere: paths are the spec's
	require.Zero(t, code)
	require.Contains(t, out, "900 samples in 18 batches, 3 pass(es)")

	out, _, code = execCLI(t, dir, "run", "--spec", spec, "--passes", "1")
	require.Zero(t, code)
	require.Contains(t, out, "300 samples", "--passes overrides the program")

	missing := filepath.Join(dir, "missing.yaml")
	require.NoError(t, os.WriteFile(missing, []byte("startup:\n  - {op: open_files, out: f, attrs: {file_names: [nothere.recordio]}}\n"), 0o644))
	_, stderr, code := execCLI(t, dir, "run", "--spec", missing)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, filepath.Join(dir, "nothere.recordio")+": no such file or directory")
	require.NotContains(t, stderr, "record 0", "a file that cannot be opened fails at no record")

	for _, flag := range []string{"--batch", "--shuffle", "--seed", "--threads"} {
		_, stderr, code = execCLI(t, dir, "run", "--spec", spec, flag, "7")
		require.Equal(t, 2, code, flag)
		require.Contains(t, stderr, flag+" has no effect with --spec")
	}
}

// Two directories of part-00000.recordio gave colliding ids, and the
// README's exactly-once check counted duplicates where there were none.
func TestEmitIDsAreUniqueAcrossDirectories(t *testing.T) {
	a, b := genSet(t, 1, 100), genSet(t, 1, 100, "--seed", "2")
	ids := filepath.Join(t.TempDir(), "ids.jsonl")
	_, _, code := execCLI(t, a, "run", "--data", filepath.Join(a, fileName(0)), "--data", filepath.Join(b, fileName(0)), "--emit-ids", ids)
	require.Zero(t, code)
	var want []string
	for _, dir := range []string{a, b} {
		for r := range 100 {
			want = append(want, fmt.Sprintf("%s/%s#%d", filepath.Base(dir), fileName(0), r))
		}
	}
	readIDs(t, ids, 1, 1, 1, want)
}

// Overlapping globs read a file twice without a word, and 'data/*' failed
// with "no format for data/*" although every file it matches is RecordIO.
func TestDataGlobsAreDeduplicatedAndResolvedPerFile(t *testing.T) {
	dir := genSet(t, 2, 200)
	out, _, code := execCLI(t, dir, "run", "--data", filepath.Join(dir, "*"))
	require.Zero(t, code)
	require.Contains(t, out, "open_files(2 files)")
	require.Contains(t, out, "200 samples")
	out, _, code = execCLI(t, dir, "run", "--data", filepath.Join(dir, "*.recordio"), "--data", filepath.Join(dir, "part-0000[0].recordio"),
		"--data", filepath.Join(dir, ".", fileName(1)))
	require.Zero(t, code)
	require.Contains(t, out, "open_files(2 files)")
	require.Contains(t, out, "200 samples", "each file once")
}

// A bad command line exits 2 with one line: an unknown command, a missing
// or extra argument, an entry with no path (they exited 1).
func TestBadCommandLinesAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"runn"},
		{"inspect"},
		{"inspect", "a.rio", "b.rio"},
		{"gen", "extra", "--out", dir},
		{"run", "--data", "recordio:"},
		{"run", "--data", "x.rio", "--metrics-addr", "abc"},
		{"run", "--data", "x.rio", "--metrics-addr", "0.0.0.0:9100"},
		{"run", "--data", "x.rio", "--devices", "9223372036854775807"},
		{"run", "--data", "x.rio", "--shuffle", "9223372036854775806"},
		{"run", "--data", "x.rio", "--device", "tpu"},
		{"run", "--data", "x.rio", "--device", "cuda", "--step", "1ms"},
		{"run", "--data", "x.rio", "--lanes", "-1"},
		{"sim", "--parallel", "1000000"},
		{"sim", "--scenarios", "9223372036854775807"}, // listed them all first, deaf to SIGTERM
		{"sim", "--faults", "f.yaml"},
		{"sim", "--spec", "p.yaml", "--preempt"},
		{"sim", "--spec", "p.yaml", "--runs", "0"},
		{"sim", "--spec", "p.yaml", "--time-scale", "2"},
		{"sim", "--spec", "p.yaml", "--time-scale", "NaN"}, // passed the range check
		{"sim", "--spec", "p.yaml", "--on-corrupt", "maybe"},
		{"gen", "--out", dir, "--files", "9223372036854775807", "--samples", "9223372036854775807"}, // panicked in makeslice
		// A format inspect does not read exited 1 where run exits 2 (issue 32).
		{"inspect", "megatron(seq_len=8):x.bin"},
		{"inspect", "x.unknown"},
		{"run", "--data", "x.unknown"}, // exited 1, where inspect exits 2
	} {
		_, stderr, code := execCLI(t, dir, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
}

// --device cuda on a machine without a GPU says so and fails; with one,
// every byte reaches it (the GPU's checksum is printed).
func TestRunOnCUDA(t *testing.T) {
	dir := genSet(t, 2, 1000)
	out, stderr, code := execCLI(t, dir, "run", "--data", filepath.Join(dir, "*.recordio"), "--device", "cuda", "--devices", "2")
	if _, err := cuda.Count(); errors.Is(err, cuda.ErrNoDriver) {
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "--device cuda: cuda: no CUDA driver")
		t.Skipf("no CUDA driver: %v", err)
	}
	require.Zero(t, code, stderr)
	require.Contains(t, out, "gpu: ")
	require.Contains(t, out, "checksum")
}

// A user's program simulated in lanes keeps every promise under panics of
// its lanes' batch stages and of the merge stage: the run passes its
// invariants. Without lanes there is no merge stage to strike.
func TestSimWhatIfInLanes(t *testing.T) {
	dir := genSet(t, 3, 30000) // eight 1 MiB chunks a stretch: 30,000 samples are three
	spec := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(fmt.Sprintf(`startup:
  - op: open_files
    out: files
    attrs: {file_names: [%s, %s, %s]}
  - {op: create_shuffle_reader, in: files, out: shuffled, attrs: {buffer_size: 1000, seed: 3}}
  - {op: create_batch_reader, in: shuffled, out: batches, attrs: {batch_size: 500}}
  - {op: create_double_buffer_reader, in: batches, out: reader}
devices: {n: 2}
`, fileName(0), fileName(1), fileName(2))), 0o644))
	faults := filepath.Join(dir, "f.yaml")
	require.NoError(t, os.WriteFile(faults, []byte("faults:\n  - {kind: panic, stage: batch, at: 5}\n  - {kind: panic, stage: merge, at: 9}\n"), 0o644))
	out, err := cli(t, "sim", "--spec", spec, "--faults", faults, "--runs", "1", "--lanes", "3")
	require.NoError(t, err, out)
	require.Contains(t, out, "invariants (exactly once, no hang, no leak, bounded memory): 1 of 1 run(s) pass")
	require.Contains(t, out, "panic ")
	_, err = cli(t, "sim", "--spec", spec, "--lanes", "0")
	require.ErrorContains(t, err, "--lanes")
	_, err = cli(t, "sim", "--spec", spec, "--faults", faults, "--runs", "1") // one lane: no merge stage
	require.ErrorContains(t, err, "the program has no merge stage")
}

func TestSimWhatIfPrintsRatiosOfItsTwoRuns(t *testing.T) {
	dir := genSet(t, 2, 1000)
	spec := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(fmt.Sprintf(`startup:
  - op: open_files
    out: files
    attrs: {file_names: [%s, %s]}
  - {op: create_batch_reader, in: files, out: batches, attrs: {batch_size: 50}}
  - {op: create_double_buffer_reader, in: batches, out: reader}
devices: {n: 2, step: 2ms}
`, fileName(0), fileName(1))), 0o644))
	faults := filepath.Join(dir, "f.yaml")
	require.NoError(t, os.WriteFile(faults, []byte("faults:\n  - {kind: stall-device, device: 0, length: 30ms, at: 3}\n  - {kind: latency, dist: {fixed: 1ms}}\n"), 0o644))
	js := filepath.Join(dir, "out.json")
	out, err := cli(t, "sim", "--spec", spec, "--faults", faults, "--runs", "1", "--seed", "4", "--baseline", "--json", js, "--report", filepath.Join(dir, "report"))
	require.NoError(t, err, out)
	require.Contains(t, out, "with faults / baseline: throughput ")
	require.Contains(t, out, "invariants (exactly once, no hang, no leak, bounded memory): 1 of 1 run(s) pass")
	data, err := os.ReadFile(js)
	require.NoError(t, err)
	var doc struct {
		Runs []struct {
			Throughput float64
			ElapsedS   float64 `json:"elapsed_s"`
			Fired      map[string]int
		}
		Baseline struct {
			Throughput float64
			ElapsedS   float64 `json:"elapsed_s"`
		}
		Ratios struct{ Throughput, Elapsed float64 }
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	require.Len(t, doc.Runs, 1)
	require.Equal(t, 1, doc.Runs[0].Fired["stall-device"])
	require.Positive(t, doc.Baseline.Throughput)
	require.InDelta(t, doc.Runs[0].Throughput/doc.Baseline.Throughput, doc.Ratios.Throughput, 1e-9)
	require.InDelta(t, doc.Runs[0].ElapsedS/doc.Baseline.ElapsedS, doc.Ratios.Elapsed, 1e-9)
	for _, png := range []string{"baseline.png", "run-4.png"} { // however short: a run's first and last points bound its series
		st, err := os.Stat(filepath.Join(dir, "report", png))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
}

// A program's create_map_reader names one of the CLI's maps: run and
// sim --spec bind it, and its stage shows in the pipeline.
func TestRunAndSimBindTheCLIsMaps(t *testing.T) {
	dir := genSet(t, 2, 600)
	spec := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(fmt.Sprintf(`startup:
  - {op: open_files, out: files, attrs: {file_names: [%s, %s]}}
  - {op: create_batch_reader, in: files, out: batches, attrs: {batch_size: 32}}
  - {op: create_map_reader, in: batches, out: mapped, attrs: {map: normalize}}
  - {op: create_double_buffer_reader, in: mapped, out: reader}
devices: {n: 2}
`, fileName(0), fileName(1))), 0o644))
	out, err := cli(t, "run", "--spec", spec)
	require.NoError(t, err, out)
	require.Contains(t, out, "batch(32) -> map(normalize) -> double_buffer")
	require.Contains(t, out, "600 samples")
	out, err = cli(t, "sim", "--spec", spec, "--runs", "1")
	require.NoError(t, err, out)
	require.Contains(t, out, "1 of 1 run(s) pass")
}

// Under --on-corrupt skip, a file cut inside its last chunk failed the
// run; a flipped byte dropped its chunk without saying so beyond a record
// count. The cut tail is skipped and every whole chunk delivered, and the
// summary names the damaged chunks and the records they held.
func TestSkipMeansSkip(t *testing.T) {
	dir := genSet(t, 1, 5000)
	path := filepath.Join(dir, fileName(0))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	fh, err := os.Open(path)
	require.NoError(t, err)
	x, err := recordio.LoadIndex(fh, int64(len(data)), path)
	require.NoError(t, fh.Close())
	require.NoError(t, err)
	last, second := x.Chunks[len(x.Chunks)-1], x.Chunks[1]

	cut := filepath.Join(t.TempDir(), "cut.recordio")
	require.NoError(t, os.WriteFile(cut, data[:last.Offset+100], 0o644))
	_, err = cli(t, "run", "--data", cut)
	require.ErrorIs(t, err, format.ErrCorrupt, "the fail policy fails")
	out, err := cli(t, "run", "--data", cut, "--on-corrupt", "skip", "--shuffle", "64")
	require.NoError(t, err)
	require.Contains(t, out, fmt.Sprintf("%d samples in", last.FirstRecord), "every whole chunk")
	require.Contains(t, out, fmt.Sprintf("skipped 1 damaged chunk(s) (%d records by their headers); the first: recordio: %s: chunk %d, offset %d", last.NumRecords, cut, last.Index, last.Offset))
	out, err = cli(t, "inspect", cut)
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.Contains(t, out, fmt.Sprintf("damaged: chunk %d, 100 bytes at offset %d: chunk declares %d payload bytes", last.Index, last.Offset, last.StoredSize))

	flipped := filepath.Join(t.TempDir(), "flipped.recordio")
	b := bytes.Clone(data)
	b[second.Offset+recordio.HeaderSize+1000] ^= 0xff
	require.NoError(t, os.WriteFile(flipped, b, 0o644))
	out, err = cli(t, "run", "--data", flipped, "--on-corrupt", "skip", "--passes", "2")
	require.NoError(t, err)
	require.Contains(t, out, fmt.Sprintf("%d samples in", 2*(5000-int(second.NumRecords))))
	require.Contains(t, out, fmt.Sprintf("skipped records %d (last pass)", second.NumRecords))
	require.Contains(t, out, fmt.Sprintf("skipped 1 damaged chunk(s) (%d records by their headers); the first: recordio: %s: chunk %d, offset %d: format: corrupt data: checksum", second.NumRecords, flipped, second.Index, second.Offset), "each chunk once, whatever the passes")
}

// --lanes defaulted to 1: a user who never read about it left the second
// core idle. The default is a lane a core, as long as each lane has 16 MiB
// of the data; 1 for a small data set and with --any-order.
func TestLanesDefaultToTheCores(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	require.NoError(t, os.MkdirAll(small, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(small, "a.recordio"), make([]byte, 1<<20), 0o644))
	big := filepath.Join(dir, "big")
	require.NoError(t, os.MkdirAll(big, 0o755))
	for i := range runtime.NumCPU() {
		f, err := os.Create(filepath.Join(big, fmt.Sprintf("f%d.recordio", i)))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(laneBytes)) // sparse: the size is what counts
		require.NoError(t, f.Close())
	}
	bigFiles, err := filepath.Glob(filepath.Join(big, "*"))
	require.NoError(t, err)
	require.Equal(t, runtime.NumCPU(), autoLanes(runOptions{}, bigFiles))
	require.Equal(t, 1, autoLanes(runOptions{}, []string{filepath.Join(small, "a.recordio")}))
	require.Equal(t, 1, autoLanes(runOptions{anyOrder: true}, bigFiles))
	require.Equal(t, 1, autoLanes(runOptions{service: []string{"127.0.0.1:1"}}, bigFiles))
	data := genSet(t, 8, 48000) // 38 MB
	out, err := cli(t, "run", "--data", filepath.Join(data, "*.recordio"))
	require.NoError(t, err)
	if runtime.NumCPU() > 1 {
		require.Contains(t, out, "in 2 lanes", "the data has 16 MiB for each of 2 lanes")
	}
}
