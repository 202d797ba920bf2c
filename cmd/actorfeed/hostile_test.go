package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
)

// The bounds a hostile input must end within: an error or a skip, in a
// process that used at most this much memory and CPU time.
const (
	hostileRSS = 64 << 20
	hostileCPU = 1 // second, enforced by RLIMIT_CPU
	// hostileAS caps the address space, so that a regression fails the
	// test instead of taking the machine: Go reserves some 600 MB of it
	// at start and each thread's stack 8 MB more (at 1 GiB, one start in
	// ten ran out).
	hostileAS = 2 << 30
)

// capped is a command run by a process under the caps above.
type capped struct {
	code   int
	stdout string
	stderr string
	rss    int64 // peak resident bytes
}

// buildCLI builds actorfeed without the race detector, whose shadow
// memory no address-space cap admits.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "actorfeed")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// runCapped runs bin with args in dir under the caps: prlimit (from
// util-linux) sets them and execs the command, under GNU time, which
// reports its peak RSS. The process's own rusage would not do: a process
// that Go starts (vfork) keeps the starting process's peak RSS, the test
// binary's, across its exec.
func runCapped(t *testing.T, bin, dir string, args ...string) capped {
	t.Helper()
	return runCappedWith(t, caps{as: hostileAS, cpu: hostileCPU}, bin, dir, args...)
}

// caps are a capped process's address space (bytes) and CPU (seconds).
type caps struct {
	as  int64
	cpu int
}

// runCappedWith runs bin as runCapped does, under c.
func runCappedWith(t *testing.T, c caps, bin, dir string, args ...string) capped {
	t.Helper()
	rss := filepath.Join(t.TempDir(), "rss")
	argv := append([]string{"-f", "%M %x", "-o", rss, "prlimit", fmt.Sprintf("--as=%d", c.as), fmt.Sprintf("--cpu=%d", c.cpu), "--", bin}, args...)
	cmd := exec.Command("/usr/bin/time", argv...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	out, err := os.ReadFile(rss)
	require.NoError(t, err)
	// time's report is its format's line, after a line of its own when the
	// command exited non-zero ("Command exited with non-zero status N")
	// or a signal ended it ("Command terminated by signal N").
	report := strings.TrimSpace(string(out))
	require.NotContains(t, report, "signal", "%v: killed (over %d s of CPU or %d bytes of address space): %s", args, c.cpu, c.as, stderr.String())
	var kb int64
	var code int
	_, err = fmt.Sscanf(report[strings.LastIndex(report, "\n")+1:], "%d %d", &kb, &code)
	require.NoError(t, err, "time's report: %q", out)
	return capped{code: code, stdout: stdout.String(), stderr: stderr.String(), rss: kb << 10}
}

// chunk is a RecordIO chunk of compressor c whose header declares records
// and stored bytes as given, its checksum right.
func chunk(c recordio.Compressor, records, stored uint32, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, recordio.Magic)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(payload))
	b = binary.LittleEndian.AppendUint32(b, uint32(c))
	b = binary.LittleEndian.AppendUint32(b, stored)
	b = binary.LittleEndian.AppendUint32(b, records)
	return append(b, payload...)
}

// gzipped is data compressed, as a gzip chunk's payload.
func gzipped(t *testing.T, data []byte) []byte {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return z.Bytes()
}

// hostileFiles are crafted files, by name: headers that declare what
// their bytes cannot hold, or more than a reader could bear.
func hostileFiles(t *testing.T) map[string][]byte {
	junk := bytes.Repeat([]byte{0xa5}, 8)
	noise := make([]byte, 300<<10)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	noise = gzipped(t, noise)
	files := map[string][]byte{
		// 4,294,967,295 records in 8 bytes: it grew a skipping reader's
		// order past 3.6 GB.
		"count-none.recordio":   chunk(recordio.NoCompression, 1<<32-1, 8, junk),
		"count-snappy.recordio": chunk(recordio.Snappy, 1<<32-1, 8, junk),
		"count-gzip.recordio":   chunk(recordio.Gzip, 1<<32-1, 8, junk),
		// As many records as 256 MiB of decoded bytes can hold, declared
		// by a gzip chunk of 300 KB: a count within every bound but the
		// payload's own, so its records have places in the order.
		"count-at-limit.recordio": chunk(recordio.Gzip, 64<<20, uint32(len(noise)), noise),
		"size-beyond.recordio":    chunk(recordio.NoCompression, 1, 1<<32-1, junk),
		"compressor.recordio":     chunk(7, 1, 8, junk),
		"header-cut.recordio":     chunk(recordio.NoCompression, 1, 8, junk)[:10],
		// 3-dimensional IDX of 2^31 x 2^31 x 2^31 bytes in 16 bytes.
		"dims.idx": {0, 0, 0x08, 3, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0},
	}
	var many []byte // 20,000 damaged headers in a row, each skippable in its place
	for range 20000 {
		many = append(many, chunk(recordio.NoCompression, 1<<31, 8, junk)...)
	}
	files["many.recordio"] = many
	return files
}

// Crafted files end with an error (fail) or a skip (skip) in a process
// capped at 1 s of CPU and 1 GiB of address space, within 64 MB.
func TestHostileFilesEndWithinBounds(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	for name, b := range hostileFiles(t) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	skipped := map[string]string{
		"count-none.recordio":     "skipped 1 damaged chunk(s) (0 records, 1 of an untrusted count",
		"count-snappy.recordio":   "skipped 1 damaged chunk(s)",
		"count-gzip.recordio":     "skipped 1 damaged chunk(s)",
		"count-at-limit.recordio": "skipped 1 damaged chunk(s) (67108864 records",
		"size-beyond.recordio":    "skipped 1 damaged chunk(s)",
		"compressor.recordio":     "skipped 1 damaged chunk(s)",
		"header-cut.recordio":     "skipped 1 damaged chunk(s)",
		"many.recordio":           "skipped 20000 damaged chunk(s)",
	}
	for name, want := range skipped {
		for _, policy := range []string{"fail", "skip"} {
			t.Run(name+"/"+policy, func(t *testing.T) {
				c := runCapped(t, bin, dir, "run", "--data", "recordio:"+name, "--on-corrupt", policy, "--batch", "16", "--shuffle", "64")
				t.Logf("exit %d, peak RSS %d MB", c.code, c.rss>>20)
				require.LessOrEqual(t, c.rss, int64(hostileRSS))
				if policy == "fail" {
					require.Equal(t, 1, c.code, c.stderr)
					require.Contains(t, c.stderr, name)
					require.Contains(t, c.stderr, "corrupt")
					return
				}
				require.Equal(t, 0, c.code, c.stderr)
				require.Contains(t, c.stdout, want)
			})
		}
	}
	t.Run("dims.idx", func(t *testing.T) {
		c := runCapped(t, bin, dir, "run", "--data", "idx:dims.idx", "--on-corrupt", "skip")
		require.LessOrEqual(t, c.rss, int64(hostileRSS))
		require.Equal(t, 1, c.code, c.stderr)
		require.Contains(t, c.stderr, "dims.idx")
		require.Contains(t, c.stderr, "more than 2^48 bytes")
	})
}

// Crafted specs and fault schedules are refused as bad command lines
// (exit 2) before anything is sized by them.
func TestHostileSpecsAreRefusedWithinBounds(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	stage := func(op, attrs string) string {
		return "startup:\n  - {op: open_files, out: files, attrs: {file_names: [x.recordio]}}\n" +
			"  - {op: " + op + ", in: files, out: reader, attrs: " + attrs + "}\ndevices: {reader: reader, n: 1}\n"
	}
	specs := map[string]struct{ yaml, want string }{
		"devices": {"startup:\n  - {op: open_files, out: reader, attrs: {file_names: [x.recordio]}}\ndevices: {reader: reader, n: 100000000}\n", "want n from 1 to 4096"},
		"shuffle": {stage("create_shuffle_reader", "{buffer_size: 1099511627776}"), "window 1099511627776 is more than the limit"},
		"batch":   {stage("create_batch_reader", "{batch_size: 1099511627776}"), "size 1099511627776 is more than the limit"},
		"passes":  {stage("create_multi_pass_reader", "{pass_num: 4294967295}"), "passes 4294967295 is more than the limit"},
		"window":  {stage("create_double_buffer_reader", "{window: 1099511627776}"), "window 1099511627776 is more than the limit"},
		"threads": {"startup:\n  - {op: open_files, out: reader, attrs: {file_names: [x.recordio], thread_num: 1000000000}}\n", "threads 1000000000 is more than the limit"},
	}
	for name, s := range specs {
		t.Run("spec/"+name, func(t *testing.T) {
			path := filepath.Join(dir, name+".yaml")
			require.NoError(t, os.WriteFile(path, []byte(s.yaml), 0o644))
			c := runCapped(t, bin, dir, "run", "--spec", path)
			require.LessOrEqual(t, c.rss, int64(hostileRSS))
			require.Equal(t, 2, c.code, c.stderr)
			require.Contains(t, c.stderr, s.want)
		})
	}
	spec := filepath.Join(dir, "sim.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(stage("create_batch_reader", "{batch_size: 4}")), 0o644))
	schedules := map[string]struct{ yaml, want string }{
		"rate":    {"{kind: stall-read, length: 1ms, rate: 1000000000000}", "rate: want stalls per second"},
		"length":  {"{kind: stall-device, length: 1000000h, at: 1}", "length: want a duration in"},
		"latency": {"{kind: latency, dist: {fixed: 1000000h}}", "want latencies up to"},
		"factor":  {"{kind: slow-device, factor: 1e300}", "factor: want a slowdown"},
		"until":   {"{kind: stall-read, length: 1ms, times: [1ms], until: 1000000000h}", "until"},
	}
	for name, s := range schedules {
		t.Run("schedule/"+name, func(t *testing.T) {
			path := filepath.Join(dir, name+".faults.yaml")
			require.NoError(t, os.WriteFile(path, []byte("faults:\n  - "+s.yaml+"\n"), 0o644))
			c := runCapped(t, bin, dir, "sim", "--spec", spec, "--faults", path, "--runs", "1")
			require.LessOrEqual(t, c.rss, int64(hostileRSS))
			require.Equal(t, 2, c.code, c.stderr)
			require.True(t, strings.Contains(c.stderr, s.want), c.stderr)
		})
	}
}

// Errors showed the stages they passed through ("program: starting reader
// ... actors: stage 0-open_files ... indexing the file: cannot open:
// recordio: stat ..."). A user sees one line naming the input, what is
// wrong and what to do; --verbose shows the chain.
func TestErrorsAreOneLineNamingTheInput(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.recordio"), chunk(recordio.NoCompression, 1<<32-1, 8, make([]byte, 8)), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--data", "recordio:bad.recordio"},
			"actorfeed: bad.recordio (chunk 0, offset 0): header declares 4294967295 records; 8 stored bytes (compressor none) hold at most 2; the recordio data is damaged: --on-corrupt skip skips it, actorfeed inspect shows it\n"},
		{[]string{"run", "--data", "recordio:missing.recordio"}, "actorfeed: missing.recordio: no such file or directory\n"},
	} {
		c := runCapped(t, bin, dir, tc.args...)
		require.NotZero(t, c.code)
		require.Equal(t, tc.want, c.stderr, "%v", tc.args)
		c = runCapped(t, bin, dir, append(tc.args, "--verbose")...)
		require.Contains(t, c.stderr, "program: starting reader", "--verbose: the chain")
	}
	spec := filepath.Join(dir, "spec.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("startup:\n  - {op: open_files, out: files, attrs: {file_names: [bad.recordio]}}\n"+
		"  - {op: create_shuffle_reader, in: files, out: reader, attrs: {buffer_size: 100000000}}\n"), 0o644))
	c := runCapped(t, bin, dir, "run", "--spec", spec)
	require.Equal(t, 2, c.code)
	require.Equal(t, "actorfeed: stage 1 (shuffle): window 100000000 is more than the limit 67108864\n", c.stderr)
}

// A list of a million names, none of which exists, ends in seconds with
// one line naming the first, under a 3 GB cap: the names are resolved
// once, stated only as far as sizing the lanes needs, and the build stops
// at the first file it cannot open. It took 170 s and 830 MB.
func TestAMillionMissingNamesFailAtTheFirst(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	got := runCappedWith(t, caps{as: 3 << 30, cpu: 60}, bin, dir, "run", "--data", "x-{000000..999999}.tar")
	require.Equal(t, 1, got.code, got.stderr)
	lines := strings.Split(strings.TrimSpace(got.stderr), "\n")
	require.Len(t, lines, 1, got.stderr)
	require.Contains(t, lines[0], "x-000000.tar")
	require.Contains(t, lines[0], "no such file")
	require.Less(t, got.rss, int64(1<<30), "peak RSS")
	t.Logf("a million missing names: peak RSS %d MB", got.rss>>20)
}

// A TFRecord record of one-byte packed varints, each 8 bytes of slots, is
// refused by name within bounded memory, or skipped and counted under
// --on-corrupt skip. A 100 MB one took 4.2 GB of RSS, and died under a
// 3 GB cap with --batch 2.
func TestAVarintBombEndsWithinMemory(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	n := tfrecord.MaxSampleBytes/8 + 1
	list := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bytes.Repeat([]byte{1}, n))
	feature := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), list)
	entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("x"))
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), feature)
	features := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)
	var file bytes.Buffer
	w := tfrecord.NewWriter(&file)
	require.NoError(t, w.Write(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), features)))
	var ok tfrecord.Example
	ok.Int64("x", 7)
	require.NoError(t, w.Write(ok.Marshal()))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bomb.tfrecord"), file.Bytes(), 0o644))
	data := "tfrecord(x=int64[]):bomb.tfrecord"
	c := caps{as: 3 << 30, cpu: 60}
	got := runCappedWith(t, c, bin, dir, "run", "--data", data, "--batch", "2", "--threads", "1")
	require.Equal(t, 1, got.code, got.stderr)
	require.Contains(t, got.stderr, "bomb.tfrecord (record 0, offset 0)")
	require.Contains(t, got.stderr, "more than a sample may hold")
	require.Less(t, got.rss, int64(512<<20), "peak RSS")
	got = runCappedWith(t, c, bin, dir, "run", "--data", data, "--batch", "2", "--threads", "1", "--on-corrupt", "skip")
	require.Zero(t, got.code, got.stderr)
	require.Contains(t, got.stdout, "1 samples")
	require.Less(t, got.rss, int64(512<<20), "peak RSS")
}
