package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/google/renameio/v2"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/program"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/objstore"
)

// session runs a pipeline's passes on its devices and keeps what a person
// wants to see afterwards: per-device data waits, throughput, restarts.
type session struct {
	p        *actors.Pipeline
	devices  int
	passes   int
	names    []string // sample ids name files by their base name
	step     actors.StepFunc
	storage  actors.Storage // where batches are made, when not Go memory
	stepTime time.Duration
	emit     *idEmitter
	ckpt     *checkpointer
	progress *progress
	// maxBatches, when set, stops the run once its devices stepped that
	// many batches (actors.Devices.Steps).
	maxBatches int
	rank       int // the job's rank this run is (Options.Shard)
	watch      watchOptions

	metricsURL string
	recorder   *recorder
	reported   []string // files the report wrote

	mu      sync.Mutex
	waits   [][]time.Duration // per device: the time it waited for each batch
	idle    []time.Time       // per device: when its last step ended
	start   time.Time
	elapsed time.Duration
	stopped error     // why the run was stopped before its end (a signal), for the summary
	log     io.Writer // where the run says what it serves, if anywhere
}

// check validates the watch flags before anything runs.
func (w *watchOptions) check() error {
	if w.sampleEvery <= 0 {
		return fmt.Errorf("--sample-every must be positive")
	}
	if w.metricsAddr != "" {
		if _, err := loopback(w.metricsAddr, w.expose); err != nil {
			return err
		}
	}
	return nil
}

// deviceStep wraps the session's step: it measures the device's wait for
// data, steps (or sleeps the simulated step time), and writes the batch's
// ids when asked to.
func (s *session) deviceStep(ctx context.Context, it actors.Item) error {
	d := actors.DeviceFrom(ctx)
	now := time.Now()
	s.mu.Lock()
	s.waits[d] = append(s.waits[d], now.Sub(s.idle[d]))
	s.mu.Unlock()
	if s.step != nil {
		if err := s.step(ctx, it); err != nil {
			return err
		}
	} else if s.stepTime > 0 {
		t := time.NewTimer(s.stepTime)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if s.emit != nil {
		if err := s.emit.write(it, d, s.names); err != nil {
			return err
		}
	}
	s.ckpt.step()
	s.mu.Lock()
	s.idle[d] = time.Now()
	s.mu.Unlock()
	return nil
}

// errMaxBatches is why a run that stepped --max-batches batches ended.
var errMaxBatches = errors.New("stopped after --max-batches batches")

// watchOptions say how a run is observed besides the summary.
type watchOptions struct {
	metricsAddr string // serve Prometheus metrics here while running
	expose      bool   // metricsAddr may be reachable from other machines
	report      string // write the report's pictures to this directory
	sampleEvery time.Duration
}

func (w *watchOptions) flags(f interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}) {
	f.StringVar(&w.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at host:port while running (a bare :port listens on 127.0.0.1)")
	f.BoolVar(&w.expose, "metrics-expose", false, "allow a --metrics-addr that other machines can reach (such as 0.0.0.0:9100)")
	f.StringVar(&w.report, "report", "", "write pictures of the run to this directory: throughput, device utilisation, buffer depth per stage, the actor tree")
	f.DurationVar(&w.sampleEvery, "sample-every", 100*time.Millisecond, "sampling interval of the report's time series")
}

// prepareOutputs checks every output of the run before it starts, so that a
// long run's work is never lost to a bad path at its end: the ids file is
// created (under its temporary name) and must not be one of the data files,
// and the report's directory is made.
func (s *session) prepareOutputs(emitIDs, ckpt string, stages []actors.Stage) error {
	if s.watch.report != "" {
		if err := os.MkdirAll(s.watch.report, 0o755); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	var paths []string
	if f, ok := stages[0].(actors.Files); ok {
		paths = make([]string, len(f.Paths))
		for i, e := range f.Paths {
			_, paths[i], _ = readers.ParseEntry(e)
		}
	}
	if ckpt != "" {
		if err := atomicfile.Refuse(ckpt, paths...); err != nil {
			return fmt.Errorf("--checkpoint: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(ckpt), 0o755); err != nil {
			return fmt.Errorf("--checkpoint: %w", err)
		}
	}
	if emitIDs == "" {
		return nil
	}
	if err := atomicfile.Refuse(emitIDs, paths...); err != nil {
		return fmt.Errorf("--emit-ids: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(emitIDs), 0o755); err != nil {
		return fmt.Errorf("--emit-ids: %w", err)
	}
	var err error
	s.emit, err = newIDEmitter(emitIDs)
	return err
}

// launch starts the scope's reader on the session's devices. The devices
// step from the moment the pipeline exists, so everything deviceStep uses
// (the emitter too) must be set before.
func (s *session) launch(ctx context.Context, scope *program.Scope, reader string) error {
	s.waits = make([][]time.Duration, s.devices)
	s.idle = make([]time.Time, s.devices)
	s.start = time.Now()
	for d := range s.idle {
		s.idle[d] = s.start
	}
	// No step of a session keeps a batch's tensors past its return (the
	// simulated wait, the demo's model, the ids it writes), so the batch
	// stage may make later batches in their storage.
	p, err := scope.RunDevices(ctx, reader, actors.Devices{N: s.devices, Step: s.deviceStep, Storage: s.storage, Steps: s.maxBatches, Recycle: true})
	if err != nil {
		return err
	}
	s.p = p
	return nil
}

// run runs every pass, resetting the pipeline between them. However it
// ends (done, failed or stopped), the time it ran is kept for the summary
// and the report is drawn of what was sampled.
func (s *session) run(ctx context.Context, afterPass func(pass int) error) (err error) {
	defer func() { s.elapsed = time.Since(s.start) }()
	if s.watch.metricsAddr != "" {
		m, err := serveMetrics(s.watch.metricsAddr, s.watch.expose, func() *actors.Pipeline { return s.p })
		if err != nil {
			return err
		}
		s.metricsURL = "http://" + m.addr + "/metrics"
		if s.log != nil {
			fmt.Fprintf(s.log, "metrics: %s\n", s.metricsURL) // the address bound, also for port 0
		}
		defer func() { err = errors.Join(err, m.stop()) }()
	}
	if s.watch.report != "" {
		s.recorder = newRecorder(s.watch.sampleEvery)
		s.recorder.start(s.p, s.start)
		defer func() {
			// The run is over: the pipeline is closed first (finish's Close
			// then does nothing), so that the report shows the workers as
			// the summary does, their sessions closed.
			s.p.Close()
			written, rerr := writeReport(s.watch.report, s.recorder.stop(), s.p.StageStats(), s.p.ServiceWorkers(), s.devices)
			s.reported = written
			if err == nil {
				err = rerr // a run that failed or stopped reports that, not a report too short to draw
			}
		}()
	}
	if s.progress != nil {
		s.progress.start(s)
		defer s.progress.stop()
	}
	for pass := range s.passes {
		if s.p.Stopped() { // --max-batches
			break
		}
		if err := s.runPass(ctx, pass, afterPass); err != nil {
			return err
		}
	}
	return s.emit.flush()
}

// runPass runs pass number pass.
func (s *session) runPass(ctx context.Context, pass int, afterPass func(pass int) error) error {
	if pass > 0 {
		if err := s.p.Reset(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	for d := range s.idle {
		s.idle[d] = time.Now()
	}
	s.mu.Unlock()
	if err := s.emitLeft(); err != nil {
		return err
	}
	if err := s.p.Run(ctx); err != nil {
		return err
	}
	if afterPass != nil {
		return afterPass(pass)
	}
	return nil
}

// summary is the table a run ends with.
func (s *session) summary(w io.Writer) {
	st := s.p.Stats()
	samples, batches := 0, 0
	for _, d := range st.Devices {
		samples += d.Instances
		batches += d.Batches
	}
	secs := s.elapsed.Seconds()
	if s.stopped != nil {
		fmt.Fprintf(w, "\n%v: the summary so far", s.stopped)
	}
	fmt.Fprintf(w, "\n%d samples in %d batches, %d pass(es), %v: %.0f samples/s\n", samples, batches, s.passes,
		s.elapsed.Round(time.Millisecond), float64(samples)/secs)
	fmt.Fprintf(w, "restarts %d, skipped records %d (last pass), peak batches alive %d\n", st.Restarts, st.Skipped, st.PeakLiveBatches)
	corruptSummary(w, st.Corrupt, st.CorruptChunks)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "device\tbatches\tsamples\tbusy\tdata wait p50\tdata wait p95\t")
	for _, d := range st.Devices {
		p50, p95 := percentile(s.waits[d.Device], 0.50), percentile(s.waits[d.Device], 0.95)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.0f%%\t%v\t%v\t\n", d.Device, d.Batches, d.Instances,
			100*d.Busy.Seconds()/secs, round(p50), round(p95))
	}
	tw.Flush()
	serviceSummary(w, s.p.ServiceWorkers(), secs)
	if requests, bytes := objstore.Totals(); requests > 0 {
		copied := ""
		if c := objstore.CopiedTotal(); c > 0 {
			copied = fmt.Sprintf(", %.1f MB from the object cache", float64(c)/1e6)
		}
		fmt.Fprintf(w, "object store: %d requests, %.1f MB read%s\n", requests, float64(bytes)/1e6, copied)
	}
	evictionSummary(w)
	if s.metricsURL != "" {
		fmt.Fprintf(w, "metrics were served at %s\n", s.metricsURL)
	}
	if len(s.reported) > 0 {
		fmt.Fprintf(w, "report: %s\n", strings.Join(s.reported, ", "))
	}
}

// evictionSummary says what the run removed from the caches to keep them
// under their limits, if anything.
func evictionSummary(w io.Writer) {
	decode, object := readers.CacheEvictions()
	for _, c := range []struct {
		name, env string
		e         readers.Evictions
	}{{"decode cache", readers.DecodeCacheBytesEnv, decode}, {"object cache", readers.ObjectCacheBytesEnv, object}} {
		if c.e.Files > 0 {
			fmt.Fprintf(w, "%s: evicted %d files, %.1f MB, to stay under %s=%s\n", c.name, c.e.Files,
				float64(c.e.Bytes)/1e6, c.env, os.Getenv(c.env))
		}
	}
}

func percentile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// round keeps durations readable: microseconds below a millisecond.
func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(10 * time.Microsecond)
}

// idEmitter writes one JSON line per consumed batch:
// {"epoch":E,"device":D,"seq":S,"ids":["<file>#<record>",...]}.
// The file is written under a temporary name and renamed into place by
// close, holding whole lines only: a run that fails or is stopped leaves
// the ids of every batch its devices consumed, and a process killed before
// close leaves the old file (if any) untouched, never half a line.
type idEmitter struct {
	mu     sync.Mutex
	f      *renameio.PendingFile
	w      *bufio.Writer
	closed bool
}

func newIDEmitter(path string) (*idEmitter, error) {
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--emit-ids: %w", err)
	}
	return &idEmitter{f: f, w: bufio.NewWriter(f)}, nil
}

// idLine is a consumed batch: its epoch (the pass, counted on across a
// resume), the device that stepped it, its index in the epoch, and its
// samples.
type idLine struct {
	Epoch  int      `json:"epoch"`
	Device int      `json:"device"`
	Seq    int      `json:"seq"`
	IDs    []string `json:"ids"`
	// Padding is how many of the last ids repeat samples dealt to a rank
	// already (--remainder pad).
	Padding int `json:"padding,omitempty"`
}

func (e *idEmitter) write(it actors.Item, device int, names []string) error {
	return e.line(idLine{Epoch: it.Epoch, Device: device, Seq: it.Index, IDs: idNames(it.IDs, names), Padding: it.Padding})
}

// leftLine is what an epoch leaves out by design (actors.Pipeline.Left),
// told by the rank that leaves it out.
type leftLine struct {
	Epoch   int      `json:"epoch"`
	Rank    int      `json:"rank"`
	Dropped []string `json:"dropped"`
}

// emitLeft writes, before a pass, what its epochs leave out by design, so
// that verify-ids counts it apart from losses. A pipeline without the
// order has nothing to tell.
func (s *session) emitLeft() error {
	if s.emit == nil {
		return nil
	}
	left, err := s.p.Left()
	if err != nil {
		return nil
	}
	for _, l := range left {
		line := leftLine{Epoch: l.Epoch, Rank: s.rank, Dropped: idNames(l.IDs, s.names)}
		if err := s.emit.line(line); err != nil {
			return err
		}
	}
	return nil
}

// idNames are sample ids as <file>#<record>, files named by names.
func idNames(ids []uint64, names []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		f, r := messages.SplitID(id)
		name := fmt.Sprintf("file%d", f)
		if f < len(names) {
			name = names[f]
		}
		out[i] = fmt.Sprintf("%s#%d", name, r)
	}
	return out
}

// line writes v as a JSON line.
func (e *idEmitter) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.w.Write(b)
	return e.w.WriteByte('\n')
}

// flush writes what is buffered; a nil emitter does nothing.
func (e *idEmitter) flush() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.w.Flush()
}

// close writes out the lines and puts the file in place; it is called once
// the devices have stopped. Closing twice does nothing.
func (e *idEmitter) close() error {
	if e == nil || e.closed {
		return nil
	}
	e.closed = true
	defer e.f.Cleanup()
	if err := e.flush(); err != nil {
		return fmt.Errorf("--emit-ids: %w", err)
	}
	if err := e.f.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("--emit-ids: %w", err)
	}
	return nil
}

// baseNames are the names sample ids use for the files of a Files stage:
// each path relative to the deepest directory that holds them all, so that
// files of one directory are named by their base names and files of the
// same name in two directories stay apart (a/part-00000.recordio,
// b/part-00000.recordio).
func baseNames(stages []actors.Stage) []string {
	switch s := stages[0].(type) {
	case actors.Files:
		paths := make([]string, len(s.Paths))
		cwd, err := os.Getwd() // once: filepath.Abs looks it up for every path
		for i, e := range s.Paths {
			_, p, _ := readers.ParseEntry(e)
			switch {
			case filepath.IsAbs(p):
				p = filepath.Clean(p)
			case err == nil:
				p = filepath.Join(cwd, p)
			}
			paths[i] = p
		}
		root := commonDir(paths)
		names := make([]string, len(paths))
		for i, p := range paths {
			if rel, err := filepath.Rel(root, p); err == nil {
				p = rel
			}
			names[i] = filepath.ToSlash(p)
		}
		return names
	case actors.Generator:
		return []string{s.Name}
	}
	return []string{"queue"}
}

// commonDir is the deepest directory that holds every path.
func commonDir(paths []string) string {
	root := filepath.Dir(paths[0])
	for _, p := range paths[1:] {
		for root != filepath.Dir(root) && !strings.HasPrefix(p, root+string(filepath.Separator)) {
			root = filepath.Dir(root)
		}
	}
	return root
}

// serviceSummary shows what a run --service of secs seconds knows of its
// workers: their state at the end, what they delivered and how fast, the
// credit they held at the end, their tasks handed out again, and the
// times each was lost.
func serviceSummary(w io.Writer, workers []actors.ServiceWorker, secs float64) {
	if len(workers) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\tstate\ttasks\tbatches\tMB\tMB/s\tcredit\treassigned\tlost\t")
	for _, x := range workers {
		mb := float64(x.Bytes) / 1e6
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%d\t%d\t%d\t\n", x.Addr, x.State, x.Tasks, x.Batches, mb, mb/max(secs, 1e-9), x.Credit,
			x.Reassigned, x.Lost)
	}
	tw.Flush()
	for _, x := range workers {
		if x.Why != "" {
			fmt.Fprintf(w, "worker %s was lost: %s\n", x.Addr, x.Why)
		}
	}
}

// corruptSummary says which damaged chunks, and samples a map could not
// read, were skipped (--on-corrupt skip), each once whatever the passes:
// how many, the records the chunks held by their headers, and the first.
func corruptSummary(w io.Writer, listed []actors.CorruptChunk, n int) {
	if n == 0 {
		return
	}
	chunks, samples, records, unknown, tails := 0, 0, 0, 0, 0
	for _, c := range listed {
		if errors.Is(c.Err, format.ErrFraming) {
			tails++
		}
		switch {
		case c.Offset < 0:
			samples++
		case c.Records < 0:
			chunks, unknown = chunks+1, unknown+1
		default:
			chunks, records = chunks+1, records+c.Records
		}
	}
	held := fmt.Sprintf("%d records", records)
	if unknown > 0 {
		held += fmt.Sprintf(", %d of an untrusted count", unknown)
	}
	if n > len(listed) {
		held += fmt.Sprintf(", in the first %d", len(listed))
	}
	var what string
	switch {
	case samples == 0:
		what = fmt.Sprintf("%d damaged chunk(s) (%s by their headers)", n, held)
	case chunks == 0 && n == len(listed):
		what = fmt.Sprintf("%d sample(s) a map could not read", n)
	case n == len(listed):
		what = fmt.Sprintf("%d damaged chunk(s) (%s by their headers) and %d sample(s) a map could not read", chunks, held, samples)
	default:
		what = fmt.Sprintf("%d damaged chunk(s) or sample(s) a map could not read", n)
	}
	if tails > 0 {
		what += fmt.Sprintf(", among them the rest of %d file(s) past damage to their framing (where their next record starts cannot be found)", tails)
	}
	fmt.Fprintf(w, "skipped %s; the first: %v\n", what, listed[0].Err)
}
