package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/actorfeed/actorfeed/internal/testutil"

	"github.com/actorfeed/actorfeed/actors/cuda"
	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// cli runs the command line args and returns its output and error.
func cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	root.SetArgs(args)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(t.Context())
	if err != nil {
		require.NotContains(t, err.Error(), "\n", "an error is one line: %v", args)
	}
	return out.String(), err
}

// genSet writes a synthetic data set of files files and samples samples
// with the gen command and returns its directory.
func genSet(t *testing.T, files, samples int, more ...string) string {
	t.Helper()
	dir := t.TempDir()
	_, err := cli(t, append([]string{"gen", "--out", dir, "--files", fmt.Sprint(files), "--samples", fmt.Sprint(samples)}, more...)...)
	require.NoError(t, err)
	return dir
}

func TestGenIsStableAndInspectable(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	out, err := cli(t, "gen", "--out", a, "--files", "3", "--samples", "1000", "--seed", "5")
	require.NoError(t, err)
	require.Contains(t, out, "wrote 1000 samples in 3 files")
	_, err = cli(t, "gen", "--out", b, "--files", "3", "--samples", "1000", "--seed", "5", "--compressor", "snappy")
	require.NoError(t, err)
	total := 0
	for f := range 3 {
		x, err := os.ReadFile(filepath.Join(a, fileName(f)))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, fileName(f)))
		require.NoError(t, err)
		require.Equal(t, x, y, "the same flags give the same bytes")

		out, err := cli(t, "inspect", filepath.Join(a, fileName(f)))
		require.NoError(t, err)
		require.Contains(t, out, "slots:   0: uint8[1,28,28], 1: int64[1]")
		require.Contains(t, out, "verdict: every checksum matches")
		r, err := readers.Open(filepath.Join(a, fileName(f)), readers.OpenOptions{})
		require.NoError(t, err)
		items, err := readers.ReadAll(context.Background(), r)
		require.NoError(t, err)
		total += len(items)
		r.Close()
	}
	require.Equal(t, 1000, total)
}

func TestConvertInspectRoundTripsFashionMNIST(t *testing.T) {
	dir := testutil.FashionDir(t)
	images := filepath.Join(dir, "t10k-images-idx3-ubyte.gz")
	out := filepath.Join(t.TempDir(), "t10k.recordio")
	msg, err := cli(t, "convert", "idx:"+images, "--out", out, "--compressor", "gzip") // the format: prefix run takes

	require.NoError(t, err)
	require.Contains(t, msg, "wrote 10000 records")
	msg, err = cli(t, "inspect", out)
	require.NoError(t, err)
	require.Contains(t, msg, "10000 records")
	require.Contains(t, msg, "slots:   0: uint8[1,28,28], 1: int64[1]", "the shape gen writes")
	require.Contains(t, msg, "verdict: every checksum matches")

	// Record i is sample i.
	want, err := readers.Open(images, readers.OpenOptions{})
	require.NoError(t, err)
	defer want.Close()
	got, err := readers.Open(out, readers.OpenOptions{})
	require.NoError(t, err)
	defer got.Close()
	for i := range 10000 {
		w, err := want.Next(t.Context())
		require.NoError(t, err)
		g, err := got.Next(t.Context())
		require.NoError(t, err)
		require.True(t, w[0].Equal(g[0]), "sample %d: image", i)
		wl, _ := tensor.View[uint8](w[1].Tensor)
		gl, _ := tensor.View[int64](g[1].Tensor)
		require.Equal(t, int64(wl[0]), gl[0], "sample %d: label", i)
	}
}

func TestBadInputExitsWithOneLine(t *testing.T) {
	dir := genSet(t, 1, 300)
	good := filepath.Join(dir, fileName(0))
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	corrupt := filepath.Join(dir, "corrupt.recordio")
	require.NoError(t, os.WriteFile(corrupt, data, 0o644))
	notIDX := filepath.Join(dir, "x-images-idx3-ubyte")
	require.NoError(t, os.WriteFile(notIDX, []byte("not an idx file"), 0o644))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", filepath.Join(dir, "missing.recordio")}, "no such file"},
		{[]string{"inspect", corrupt}, "chunk 1"}, // chunk 0 is the begin marker
		{[]string{"inspect"}, "accepts 1 arg"},
		{[]string{"inspect", "parquet:" + good}, "parquet"},
		{[]string{"gen", "--files", "2"}, "--out"},
		{[]string{"gen", "--out", dir, "--compressor", "zip"}, "zip"},
		{[]string{"gen", "--out", dir, "--samples", "nine"}, "nine"},
		{[]string{"convert", filepath.Join(dir, "missing-images-idx3-ubyte.gz"), "--out", filepath.Join(dir, "o.rio")}, "no such file"},
		{[]string{"convert", notIDX, "--out", filepath.Join(dir, "o.rio")}, notIDX},
		{[]string{"convert", good}, "--out"},
		{[]string{"nosuchcommand"}, "unknown command"},
	} {
		_, err := cli(t, tc.args...)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
	_, err = os.Stat(filepath.Join(dir, "o.rio"))
	require.ErrorIs(t, err, os.ErrNotExist, "a failed conversion leaves no output")
}

func TestSimCommand(t *testing.T) {
	out, err := cli(t, "sim", "--scenarios", "5", "--seed", "11")
	require.NoError(t, err)
	require.Contains(t, out, "files-restart-old-end", "the regression set runs too")
	require.Contains(t, out, "seed 15 ")
	require.Regexp(t, `\d+ scenarios in .*: \d+ passed, 0 failed`, out)
	out, err = cli(t, "sim", "--replay", "1287")
	require.NoError(t, err)
	require.Contains(t, out, "schedule: ")
	require.Contains(t, out, "1 scenarios")
	// A regression replays by name (--replay panic-storm could not).
	out, err = cli(t, "sim", "--replay", "panic-storm")
	require.NoError(t, err)
	require.Contains(t, out, "panic-storm")
	require.Contains(t, out, "1 scenarios")
	_, err = cli(t, "sim", "--replay", "no-such-regression")
	require.ErrorContains(t, err, "neither a seed nor a regression")
	_, err = cli(t, "sim", "--scenarios", "-1")
	require.ErrorContains(t, err, "--scenarios")
	_, err = cli(t, "sim", "--show", "some")
	require.ErrorContains(t, err, "--show")
	_, err = cli(t, "sim", "--parallel", "0")
	require.ErrorContains(t, err, "--parallel")

	// Several at a time: the table still lists them in seed order.
	out, err = cli(t, "sim", "--scenarios", "6", "--seed", "20", "--parallel", "3", "--regressions=false")
	require.NoError(t, err)
	last := -1
	for seed := 20; seed < 26; seed++ {
		at := strings.Index(out, fmt.Sprintf("seed %d ", seed))
		require.Greater(t, at, last, "seed %d in order", seed)
		last = at
	}
	require.Contains(t, out, "6 scenarios in ")

	// The table was 210 columns wide: every line fits 100.
	out, _, code := execCLI(t, t.TempDir(), "sim", "--scenarios", "60", "--seed", "20", "--show", "all")
	require.Zero(t, code)
	for _, line := range strings.Split(out, "\n") {
		require.LessOrEqual(t, len(line), 100, "%q", line)
	}
	require.Contains(t, out, "pass*: the run ended in the error that its faults made due")
}

// With --parallel, goroutines are checked once, after the last scenario;
// the ones left are traced to their scenario by the label it ran under.
func TestStartedByNamesTheScenario(t *testing.T) {
	release, running := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	pprof.Do(t.Context(), pprof.Labels(scenarioLabel, "seed 42"), func(context.Context) {
		go func() { // started as a stage's goroutine is, inside the scenario
			go func() {
				defer close(done)
				close(running)
				<-release
			}()
		}()
	})
	<-running
	require.Contains(t, startedBy(), "seed 42")
	close(release)
	<-done
}

func TestBenchCommand(t *testing.T) {
	figs := t.TempDir()
	out, err := cli(t, "bench", "--samples", "1000", "--repeat", "1", "--passes", "3", "--shuffle", "100", "--device-batch", "100", "--plot", figs)
	require.NoError(t, err)
	for _, name := range []string{"throughput.png", "device-waits.png", "heap.png"} {
		b, err := os.ReadFile(filepath.Join(figs, name))
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(b, []byte("\x89PNG")), "%s is a PNG", name)
	}
	for _, want := range []string{"plain copy of the file's bytes", "plain read of the file", "channel pipeline, a record at a time", "channel pipeline, stacked read path",
		"channel pipeline, stacked, recycled batches", "actor pipeline, recycled batches", "actor pipeline, a new one for each pass", "snappy", "busy", "first batch:", "allocations:", "heap in use after GC, 3 passes"} {
		require.Contains(t, out, want)
	}
	_, err = cli(t, "bench", "--samples", "10")
	require.ErrorContains(t, err, "--samples")
}

// convert deleted an existing --out when the conversion failed, and with
// --out naming the input it turned the IDX file into RecordIO.
func TestConvertNeverDestroysAFile(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "x-images-idx3-ubyte")
	writeIDX(t, images, 50)
	whole, err := os.ReadFile(images)
	require.NoError(t, err)
	cut := filepath.Join(dir, "cut-images-idx3-ubyte")
	require.NoError(t, os.WriteFile(cut, whole[:len(whole)-100], 0o644))
	out := filepath.Join(dir, "out.recordio")
	require.NoError(t, os.WriteFile(out, []byte("precious"), 0o644))

	_, stderr, code := execCLI(t, dir, "convert", cut, "--out", out)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, cut)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "precious", string(got), "a failed conversion keeps the existing output")

	link := filepath.Join(dir, "link.recordio")
	require.NoError(t, os.Symlink(images, link))
	for _, o := range []string{images, link} {
		_, stderr, code = execCLI(t, dir, "convert", images, "--out", o)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, atomicfile.ErrOutputIsInput.Error())
		got, err = os.ReadFile(images)
		require.NoError(t, err)
		require.Equal(t, whole, got, "the input is untouched")
	}
	onlyFiles(t, dir, "x-images-idx3-ubyte", "cut-images-idx3-ubyte", "out.recordio", "link.recordio")
}

// A file cut at a chunk boundary was called healthy by inspect and read as
// a shorter data set by run; a record that is not a tensor passed inspect
// and failed run. Both commands now agree, and say where.
func TestInspectAndRunAgreeOnCutAndUndecodableFiles(t *testing.T) {
	dir := genSet(t, 1, 3000)
	good := filepath.Join(dir, fileName(0))
	out, err := cli(t, "inspect", good)
	require.NoError(t, err)
	require.Contains(t, out, "whole:   complete")

	data, err := os.ReadFile(good)
	require.NoError(t, err)
	fh, err := os.Open(good)
	require.NoError(t, err)
	x, err := recordio.LoadIndex(fh, int64(len(data)), good)
	fh.Close()
	require.NoError(t, err)
	require.Greater(t, len(x.Chunks), 1)
	cut := filepath.Join(dir, "cut.recordio")
	require.NoError(t, os.WriteFile(cut, data[:x.Chunks[0].End()], 0o644))

	notTensor := filepath.Join(dir, "nottensor.recordio")
	_, err = readers.WriteRecordFile(notTensor, recordio.WriterOptions{}, readers.Samples(1, func(int) (tensor.Slots, error) {
		return tensor.Slots{}, nil // no slots: not one instance
	}))
	require.NoError(t, err)

	for path, want := range map[string]string{cut: "cut short", notTensor: "record 0"} {
		out, stderr, code := execCLI(t, dir, "inspect", path)
		require.Equal(t, 1, code, "inspect %s", path)
		require.Contains(t, stderr, "data is damaged")
		require.Contains(t, stderr, want)
		require.Contains(t, stderr, path)
		if path == cut {
			require.Contains(t, out, "whole:   cut short")
		}
		_, stderr, code = execCLI(t, dir, "run", "--data", path)
		require.Equal(t, 1, code, "run %s", path)
		require.Contains(t, stderr, want, "run %s", path)
		require.Contains(t, stderr, path)
	}
}

// The matrix measures every size, compressor and GOMAXPROCS asked for,
// and refuses sizes and core counts it cannot run.
func TestBenchMatrix(t *testing.T) {
	out, err := cli(t, "bench", "--sizes", "100,1K", "--procs", "1,all,1", "--files", "3", "--devices", "2", "--data-mb", "1",
		"--repeat", "1", "--shuffle", "50", "--batch", "16")
	require.NoError(t, err)
	procs := []string{"1"}
	if runtime.NumCPU() > 1 {
		procs = append(procs, strconv.Itoa(runtime.NumCPU()))
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || (f[0] != "100" && f[0] != "1K") {
			continue
		}
		rows++
		require.Contains(t, []string{"none", "snappy"}, f[1], line)
		require.Contains(t, procs, f[2], line)
	}
	require.Equal(t, 2*2*len(procs)*4, rows, "a row for each of 4 measurements, per size, compressor and GOMAXPROCS:\n%s", out)
	for _, want := range []string{"plain read of the files", "channel pipeline, a lane per core", "actor pipeline, one lane", "actor pipeline, a lane per core",
		"vs parallel", "CPU s per M samples"} {
		require.Contains(t, out, want)
	}
	_, err = cli(t, "bench", "--sizes", "0")
	require.ErrorContains(t, err, "--sizes")
	_, err = cli(t, "bench", "--sizes", "17M")
	require.ErrorContains(t, err, "--sizes")
	_, err = cli(t, "bench", "--procs", strconv.Itoa(runtime.NumCPU()+1))
	require.ErrorContains(t, err, "--procs")
	_, err = cli(t, "bench", "--sizes", "100", "--device", "tpu")
	require.ErrorContains(t, err, "--device")
	if _, err := cuda.Count(); errors.Is(err, cuda.ErrNoDriver) {
		_, err = cli(t, "bench", "--sizes", "100", "--device", "cuda")
		require.ErrorContains(t, err, "--device cuda: cuda: no CUDA driver")
	}
}

// writeIDXOf writes an IDX file of dtype code, dimensions dims and data.
func writeIDXOf(t *testing.T, path string, code byte, dims []uint32, data []byte) {
	t.Helper()
	b := []byte{0, 0, code, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	require.NoError(t, os.WriteFile(path, append(b, data...), 0o644))
}

// convert wrote the images alone, exit 0, when the labels file beside
// them was a named pipe, a link to /dev/zero or a dangling link, and kept
// float64 labels (NaN too) though its help says labels are widened to
// int64. Each is an error naming the labels file now; integer labels of
// every IDX width are widened.
func TestConvertTakesLabelsOrSaysWhy(t *testing.T) {
	dir := t.TempDir()
	images := func(name string) string {
		p := filepath.Join(dir, name+"-images-idx3-ubyte")
		writeIDXOf(t, p, 0x08, []uint32{3, 2, 2}, make([]byte, 12))
		return p
	}
	labels := func(name string) string { return filepath.Join(dir, name+"-labels-idx1-ubyte") }
	require.NoError(t, unix.Mkfifo(labels("fifo"), 0o644))
	require.NoError(t, os.Symlink("/dev/zero", labels("zero")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "gone"), labels("dangling")))
	nan := binary.BigEndian.AppendUint64(nil, math.Float64bits(1))
	nan = binary.BigEndian.AppendUint64(nan, math.Float64bits(math.NaN()))
	nan = binary.BigEndian.AppendUint64(nan, math.Float64bits(2.5))
	writeIDXOf(t, labels("float"), 0x0E, []uint32{3}, nan)
	for name, want := range map[string]string{"fifo": "not a regular file (named pipe)", "zero": "not a regular file (character device)",
		"dangling": "no such file", "float": "float64 labels: labels are class numbers"} {
		out := filepath.Join(dir, name+".recordio")
		_, err := cli(t, "convert", images(name), "--out", out)
		require.ErrorContains(t, err, want, name)
		require.ErrorContains(t, err, labels(name), name)
		require.NoFileExists(t, out)
	}
	writeIDXOf(t, labels("int16"), 0x0B, []uint32{3}, []byte{0, 7, 1, 0, 0xff, 0xff})
	out := filepath.Join(dir, "int16.recordio")
	_, err := cli(t, "convert", images("int16"), "--out", out)
	require.NoError(t, err)
	r, err := readers.OpenRecordFile(out)
	require.NoError(t, err)
	defer r.Close()
	for _, want := range []int64{7, 256, -1} {
		s, err := r.Next(t.Context())
		require.NoError(t, err)
		v, err := tensor.View[int64](s[1].Tensor)
		require.NoError(t, err)
		require.Equal(t, []int64{want}, v)
	}
}

// convert --to wds and --to tfrecord write shards of PNG images and
// classes that read back as the IDX samples they came from, shard by
// shard, each shard whole; run reads them in the order.
func TestConvertToShards(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "x-images-idx3-ubyte")
	pix := make([]byte, 25*3*4)
	for i := range pix {
		pix[i] = byte(i * 7)
	}
	writeIDXOf(t, images, 0x08, []uint32{25, 3, 4}, pix)
	labels := make([]byte, 25)
	for i := range labels {
		labels[i] = byte(i % 10)
	}
	writeIDXOf(t, filepath.Join(dir, "x-labels-idx1-ubyte"), 0x08, []uint32{25}, labels)
	for _, c := range []struct {
		to, suffix, run string
		image, label    int // the slots, in the names' order: a shard's fields, an inferred spec's features
	}{
		{"wds", ".tar", "wds:", 1, 0},
		{"tfrecord", ".tfrecord", "tfrecord(label=int64,image=bytes):", 0, 1},
	} {
		out := filepath.Join(dir, c.to)
		msg, err := cli(t, "convert", images, "--to", c.to, "--out", out, "--shard-samples", "10")
		require.NoError(t, err)
		require.Contains(t, msg, "wrote 25 samples to 3 shard(s)")
		shards, err := filepath.Glob(filepath.Join(out, "shard-*"+c.suffix))
		require.NoError(t, err)
		require.Len(t, shards, 3)
		i := 0
		for _, shard := range shards {
			r, err := readers.Open(c.to+":"+shard, readers.OpenOptions{})
			require.NoError(t, err)
			items, err := readers.ReadAll(t.Context(), r)
			require.NoError(t, err)
			r.Close()
			for _, s := range items {
				cls, err := tensor.View[int64](s[c.label].Tensor)
				require.NoError(t, err)
				require.Equal(t, []int64{int64(i % 10)}, cls)
				img, err := png.Decode(bytes.NewReader(s[c.image].Bytes()))
				require.NoError(t, err)
				require.Equal(t, pix[i*12:(i+1)*12], img.(*image.Gray).Pix, "%s sample %d", c.to, i)
				i++
			}
		}
		require.Equal(t, 25, i)

		msg, err = cli(t, "run", "--data", c.run+filepath.Join(out, "*"+c.suffix), "--batch", "4", "--shuffle", "8", "--progress-every", "1h")
		require.NoError(t, err)
		require.Contains(t, msg, "25 samples in 7 batches")
		// As run reads them, the images are slot 1 of both: after cls, after label.
		msg, err = cli(t, "run", "--data", c.run+filepath.Join(out, "*"+c.suffix), "--batch", "4", "--map", "decode(size=2,channels=1,flip,slot=1)", "--progress-every", "1h")
		require.NoError(t, err)
		require.Contains(t, msg, "25 samples in 7 batches")
		_, err = cli(t, "run", "--data", c.run+filepath.Join(out, "*"+c.suffix), "--map", "decode(size=2,slot=9)", "--progress-every", "1h")
		require.ErrorContains(t, err, "vision: slot 9: the batch has 2 slots")
	}
	for args, want := range map[string]string{"--to tf": `--to "tf": want recordio, wds or tfrecord`, "--shard-samples 0": "--shard-samples 0: want 1 to"} {
		_, err := cli(t, append([]string{"convert", images, "--out", dir}, strings.Fields(args)...)...)
		require.ErrorContains(t, err, want)
	}
}

// --features reads TFRecord files by a spec; it is checked, and refused
// where no file is a TFRecord file or an entry gives its own.
func TestFeaturesFlag(t *testing.T) {
	dir := t.TempDir()
	images := filepath.Join(dir, "x-images-idx3-ubyte")
	writeIDXOf(t, images, 0x08, []uint32{6, 2, 2}, make([]byte, 24))
	out := filepath.Join(dir, "tf")
	_, err := cli(t, "convert", images, "--to", "tfrecord", "--out", out)
	require.NoError(t, err)
	shard := filepath.Join(out, "shard-000000.tfrecord")
	msg, err := cli(t, "run", "--data", shard, "--features", "image=bytes", "--batch", "2", "--progress-every", "1h")
	require.NoError(t, err)
	require.Contains(t, msg, "6 samples in 3 batches")
	for args, want := range map[string]string{
		"--features label=int64": "the record has no feature label",
		"--features image=text":  `--features "image=text": tfrecord: feature image: kind "text"`,
	} {
		a := append([]string{"run", "--data", shard}, strings.Fields(args)...)
		_, err := cli(t, append(a, "--progress-every", "1h")...)
		require.ErrorContains(t, err, want, args)
	}
	_, err = cli(t, "run", "--data", "tfrecord(image=bytes):"+shard, "--features", "image=bytes")
	require.ErrorContains(t, err, "the entry names its own features")
	_, err = cli(t, "run", "--data", "x.recordio", "--features", "a=bytes")
	require.ErrorContains(t, err, "--data holds no TFRecord file")
}

// gen --to wds and --to tfrecord write JPEG images of known classes, the
// same for the same flags; run decodes and augments them.
func TestGenWritesJPEGShards(t *testing.T) {
	dir := t.TempDir()
	for to, image := range map[string]int{"wds": 1, "tfrecord": 0} { // the image's slot: after cls, before label
		out := filepath.Join(dir, to)
		msg, err := cli(t, "gen", "--to", to, "--out", out, "--files", "3", "--samples", "30", "--image-size", "40")
		require.NoError(t, err)
		require.Contains(t, msg, "wrote 30 JPEG images in 3 "+to+" shards")
		again := filepath.Join(dir, to+"-again")
		_, err = cli(t, "gen", "--to", to, "--out", again, "--files", "3", "--samples", "30", "--image-size", "40")
		require.NoError(t, err)
		shards, err := filepath.Glob(filepath.Join(out, "shard-*"))
		require.NoError(t, err)
		require.Len(t, shards, 3)
		for _, s := range shards {
			a, err := os.ReadFile(s)
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(again, filepath.Base(s)))
			require.NoError(t, err)
			require.Equal(t, a, b, "the same flags, the same bytes")
		}
		r, err := readers.Open(to+":"+shards[1], readers.OpenOptions{})
		require.NoError(t, err)
		items, err := readers.ReadAll(t.Context(), r)
		require.NoError(t, err)
		r.Close()
		require.Len(t, items, 10)
		img, err := jpeg.Decode(bytes.NewReader(items[0][image].Bytes()))
		require.NoError(t, err, "%s: a JPEG", to)
		require.InDelta(t, 40, img.Bounds().Dx(), 10)
		msg, err = cli(t, "run", "--data", to+":"+filepath.Join(out, "shard-*"), "--batch", "8", "--map", fmt.Sprintf("decode(size=16,slot=%d,flip)", image), "--progress-every", "1h")
		require.NoError(t, err)
		require.Contains(t, msg, "30 samples in 4 batches")
		// WebDataset's shard lists: braces, here before a glob.
		msg, err = cli(t, "run", "--data", to+":"+filepath.Join(out, "shard-00000{0..2}*"), "--batch", "8", "--progress-every", "1h")
		require.NoError(t, err)
		require.Contains(t, msg, "30 samples in 4 batches")
	}
	_, err := cli(t, "run", "--data", "wds:"+filepath.Join(dir, "wds", "shard-{000000..000003}.tar"), "--progress-every", "1h")
	require.ErrorContains(t, err, "shard-000003.tar", "a shard the braces name that is not there")
	// A damaged image's error names its shard and its key.
	shard := filepath.Join(dir, "wds", "shard-000001.tar")
	b, err := os.ReadFile(shard)
	require.NoError(t, err)
	at := bytes.Index(b, []byte("00000007.jpg"))
	require.Positive(t, at)
	copy(b[at+512+2:], bytes.Repeat([]byte{0}, 64)) // past the JPEG's SOI marker
	require.NoError(t, os.WriteFile(shard, b, 0o644))
	_, err = cli(t, "run", "--data", "wds:"+filepath.Join(dir, "wds", "shard-*"), "--batch", "8", "--map", "decode(size=16,slot=1)", "--progress-every", "1h")
	require.ErrorContains(t, err, "sample 00000007 (record 2) of "+shard)
	// Under --on-corrupt skip the image's sample leaves its batch, counted.
	msg, err := cli(t, "run", "--data", "wds:"+filepath.Join(dir, "wds", "shard-*"), "--batch", "8", "--map", "decode(size=16,slot=1)",
		"--on-corrupt", "skip", "--progress-every", "1h")
	require.NoError(t, err)
	require.Contains(t, msg, "29 samples in 4 batches")
	require.Contains(t, msg, "skipped records 1 (last pass)")
	require.Contains(t, msg, "skipped 1 sample(s) a map could not read; the first: sample 00000007 (record 2) of "+shard+": vision: not a decodable image")
	for args, want := range map[string]string{"--to png": `--to "png": want recordio, idx, wds or tfrecord`, "--to wds --image-size 2": "--image-size 2"} {
		_, err := cli(t, append([]string{"gen", "--out", dir}, strings.Fields(args)...)...)
		require.ErrorContains(t, err, want)
	}
}
