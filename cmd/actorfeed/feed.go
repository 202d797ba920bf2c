package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
)

// feedHelp is the feed command's long help.
const feedHelp = `Feeds a Python process (the actorfeed package in python/, docs/python.md)
with the batches of open_files -> shuffle -> batch [-> map] over the files
of --data, as run does, one epoch after another from --epoch (or from the
states read from stdin with --resume-stdin). Batches travel in a ring of
--slots slots of shared memory (an anonymous memory file sent over the
socket --fd, so nothing is left in /dev/shm); only their descriptions and
the pipeline's state after each batch cross the socket. A slot is reused
once the loader gives it back. feed exits when the loader closes the socket
or dies, and after --epochs epochs (0: no bound).`

// feedOptions are feed's flags.
type feedOptions struct {
	run       runOptions // the pipeline's: data, batch, shuffle, shard, service
	fd        int
	slots     int
	slotBytes int
	epoch     int
	epochs    int
	resume    bool
	// metricsAddr serves the pipeline's Prometheus metrics while the feed
	// runs, as run --metrics-addr does; expose allows a non-loopback one.
	metricsAddr string
	expose      bool
	// report is the directory the feed draws its run into when it ends,
	// as run --report does, less the devices' utilisation.
	report string
}

// feedGCPercent is the feed's GOGC from its first batch on, unless the
// user set one. The feed lives beside a trainer, whose host wants the
// memory, and recycles its batches and its readers' blocks: once its
// shuffle window is full it allocates little, so a tight heap costs its
// collector little, while the default lets the heap grow to twice the
// window. Before that, while the window fills, nearly all it allocates
// stays live, and collecting at every tenth of growth would only cost
// time: it runs at the default then (docs/python.md).
const feedGCPercent = 10

func newFeed() *cobra.Command {
	o := feedOptions{}
	cmd := &cobra.Command{
		Use:   "feed --fd N --data FILES... [flags]",
		Short: "Feed the Python loader batches in shared memory (python/, docs/python.md)",
		Long:  feedHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(cmd); err != nil {
				return usageError{err}
			}
			return runFeed(cmd.Context(), cmd.InOrStdin(), o, cmd.Flags().Changed)
		},
	}
	f := cmd.Flags()
	o.run.pipelineFlags(f)
	f.IntVar(&o.fd, "fd", -1, "the loader's end of a Unix stream socket, inherited as this descriptor")
	f.IntVar(&o.slots, "slots", 8, "slots in the shared-memory ring: batches the loader may hold or have waiting")
	f.IntVar(&o.slotBytes, "slot-bytes", 0, "bytes a slot holds (default: the first batch's, which later batches must not exceed)")
	f.IntVar(&o.epoch, "epoch", 0, "the epoch to start in, when not resuming")
	f.IntVar(&o.epochs, "epochs", 0, "epochs to feed, the first included (0: until the loader closes)")
	f.BoolVar(&o.resume, "resume-stdin", false, "resume from the JSON list of states (one rank's, or every rank's) read from stdin")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve the pipeline's Prometheus metrics at host:port while feeding (a bare :port listens on 127.0.0.1); the hello line says where")
	f.BoolVar(&o.expose, "metrics-expose", false, "allow a --metrics-addr that other machines can reach")
	f.StringVar(&o.report, "report", "", "when the feed ends, draw its run into this directory: samples/s put in the ring, buffer depth per stage, the actor tree")
	return cmd
}

func (o *feedOptions) check(cmd *cobra.Command) error {
	r := &o.run
	if len(r.data) == 0 {
		return errors.New("give the files to read with --data")
	}
	if o.fd < 0 {
		return errors.New("give the loader's socket with --fd (the Python loader starts feed; docs/python.md)")
	}
	if o.resume && cmd.Flags().Changed("epoch") {
		return errors.New("--epoch and --resume-stdin exclude each other: the states say where to start")
	}
	if o.metricsAddr != "" {
		if _, err := loopback(o.metricsAddr, o.expose); err != nil {
			return err
		}
	}
	return errors.Join(r.checkPipeline(cmd.Flags().Changed), checkInts(
		intFlag{"--slots", o.slots, minSlots, actors.MaxQueue},
		intFlag{"--slot-bytes", o.slotBytes, 0, maxRingBytes / minSlots},
		intFlag{"--epoch", o.epoch, 0, actors.MaxEpoch},
		intFlag{"--epochs", o.epochs, 0, math.MaxInt32},
	))
}

// runFeed feeds the loader on the socket --fd until it closes it, the
// epochs are done, or the pipeline fails; a failure is sent to the loader
// as one line before feed exits.
func runFeed(ctx context.Context, stdin io.Reader, o feedOptions, changed func(string) bool) error {
	conn, err := loaderConn(o.fd)
	if err != nil {
		return usageError{err}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fc := &feedConn{c: conn, w: bufio.NewWriter(conn)}
	var rp atomic.Pointer[ring]
	taken := make(chan struct{})
	go func() {
		defer close(taken)
		fc.takeBack(cancel, &rp)
	}()
	defer func() {
		conn.Close()
		<-taken
		rp.Load().close()
	}()
	var states []actors.State
	if o.resume {
		if states, err = readStdinStates(stdin); err != nil {
			return fc.fail(usageError{err})
		}
	}
	err = feedEpochs(ctx, fc, &rp, o, states, changed)
	if errors.Is(context.Cause(ctx), errLoaderGone) {
		return nil // the loader closed: the end it chose
	}
	return fc.fail(err)
}

// loaderConn is the socket the loader passed as descriptor fd.
func loaderConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "loader")
	if f == nil {
		return nil, fmt.Errorf("--fd %d is not an open descriptor", fd)
	}
	defer f.Close() // FileConn dups it
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("--fd %d: %w", fd, err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("--fd %d is not a Unix socket", fd)
	}
	return uc, nil
}

// readStdinStates reads the states to resume from: a JSON list.
func readStdinStates(r io.Reader) ([]actors.State, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxStatesBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--resume-stdin: %w", err)
	}
	if len(b) > maxStatesBytes {
		return nil, fmt.Errorf("--resume-stdin: more than %d bytes of states", maxStatesBytes)
	}
	states, err := actors.DecodeStates(b)
	if err != nil {
		return nil, usageError{fmt.Errorf("--resume-stdin: %w", err)}
	}
	if len(states) == 0 {
		return nil, errors.New("--resume-stdin: the list of states is empty")
	}
	return states, nil
}

// fail tells the loader why feed ends, in one line, and returns err.
func (f *feedConn) fail(err error) error {
	if err == nil {
		return nil
	}
	if !f.started {
		f.c.Write([]byte{'E'})
		f.started = true
	}
	f.line(failureLine(err))
	f.flush()
	return err
}

// errorLine is why the feed ends. Damaged data is said without the CLI's
// advice (a flag), and Damaged names its format: the loader gives its own,
// in its parameters' words. Usage marks a bad argument (what exits 2),
// which the loader raises as a ValueError.
type errorLine struct {
	Op      string `json:"op"`
	Message string `json:"message"`
	Damaged string `json:"damaged,omitempty"`
	Usage   bool   `json:"usage,omitempty"`
}

func failureLine(err error) errorLine {
	if fe, ok := errors.AsType[*format.Error](err); ok && !verbose && errors.Is(fe, format.ErrCorrupt) {
		return errorLine{Op: "error", Message: damageWhere(fe), Damaged: fe.Format}
	}
	return errorLine{Op: "error", Message: userMessage(err), Usage: exitCode(err) == 2}
}

// helloLine starts the feed: the ring's shape, the files' names (what a
// sample id's file index names), the slots' names where the data has them
// (a shard's fields, IDX's image and label), and why the order is a window
// where the global order was asked for where it could be had.
type helloLine struct {
	Op        string   `json:"op"`
	Slots     int      `json:"slots"`
	SlotBytes int      `json:"slot_bytes"`
	Files     []string `json:"files"`
	SlotNames []string `json:"slot_names,omitempty"`
	// Windowed is why a shuffle of "auto" shuffles in a window rather than
	// in the global order (windowedLine); absent when it does not.
	Windowed string `json:"windowed,omitempty"`
	// Metrics is the host:port the pipeline's metrics are served at
	// (--metrics-addr), its port chosen when the flag's was 0.
	Metrics string `json:"metrics,omitempty"`
}

// epochLine starts an epoch: its number and its batches (for a resumed
// epoch, those left), and the batches of the whole epoch on this world,
// which a loader's len() gives. The line after it is the state at its
// start.
type epochLine struct {
	Op      string `json:"op"`
	Epoch   int    `json:"epoch"`
	Batches int    `json:"batches"`
	Whole   int    `json:"whole_batches"`
	// Left are the ids the epoch leaves out by design (Pipeline.Left):
	// the remainder of equal shares, told by rank 0, and the last batch
	// that drop_last drops.
	Left []uint64 `json:"left,omitempty"`
	// Evicted is what the feed removed from the caches so far to keep them
	// under their limits (readers.CacheEvictions).
	Evicted *evictedLine `json:"evicted,omitempty"`
}

// evictedLine is what a feed evicted from each cache: files and bytes.
type evictedLine struct {
	Decode [2]int64 `json:"decode"`
	Object [2]int64 `json:"object"`
}

// evictedSoFar is the feed's evictions, nil while there are none.
func evictedSoFar() *evictedLine {
	d, o := readers.CacheEvictions()
	if d.Files == 0 && o.Files == 0 {
		return nil
	}
	return &evictedLine{Decode: [2]int64{int64(d.Files), d.Bytes}, Object: [2]int64{int64(o.Files), o.Bytes}}
}

// feedEpochs builds the pipeline and feeds its epochs, Reset between them.
func feedEpochs(ctx context.Context, fc *feedConn, rp *atomic.Pointer[ring], o feedOptions, states []actors.State, changed func(string) bool) error {
	p, names, done, err := startFeedPipeline(ctx, o, states, changed)
	if err != nil {
		return err
	}
	defer done()
	if o.metricsAddr != "" {
		m, err := serveMetrics(o.metricsAddr, o.expose, func() *actors.Pipeline { return p })
		if err != nil {
			return usageError{err}
		}
		defer m.stop()
		names.metrics = m.addr
	}
	if o.report != "" {
		if err := os.MkdirAll(o.report, 0o755); err != nil { // now, not at the end of the feed's work
			return usageError{fmt.Errorf("--report: %w", err)}
		}
		defer reportFeed(o.report, p, &fc.delivered)()
	}
	for pass := 0; o.epochs == 0 || pass < o.epochs; pass++ {
		if pass > 0 {
			if err := p.Reset(); err != nil {
				return err
			}
		}
		if err := feedEpoch(ctx, fc, rp, p, o, names); err != nil {
			return err
		}
		// A whole epoch without a batch (pass 0 may be a resumed epoch's
		// empty rest) means this rank's share is empty in every epoch:
		// the loader must hear so now, not wait for a batch that never
		// comes while the epochs run on unseen.
		if pass > 0 && rp.Load() == nil {
			if err := fc.makeRing(rp, o, actors.Item{}, names); err != nil {
				return err
			}
		}
	}
	if rp.Load() == nil { // no epoch had a batch
		if err := fc.makeRing(rp, o, actors.Item{}, names); err != nil {
			return err
		}
	}
	return fc.stateLine(map[string]string{"op": "done"}, p)
}

// reportFeed samples the feed's pipeline from now on; the function it
// returns draws the report into dir, saying on stderr why it could not.
func reportFeed(dir string, p *actors.Pipeline, delivered *atomic.Int64) func() {
	rec := newRecorder(100 * time.Millisecond)
	rec.counted = func() int { return int(delivered.Load()) }
	rec.start(p, time.Now())
	return func() {
		if _, err := writeReport(dir, rec.stop(), p.StageStats(), p.ServiceWorkers(), 0); err != nil {
			fmt.Fprintf(os.Stderr, "actorfeed: --report %s: %v\n", dir, err)
		}
	}
}

// makeRing makes the ring, its slots sized for first, and sends it. The
// first batch came (or the share is empty): the window is full, and the
// heap is held tight from here on.
func (f *feedConn) makeRing(rp *atomic.Pointer[ring], o feedOptions, first actors.Item, names feedNames) error {
	if _, set := os.LookupEnv("GOGC"); !set && len(o.run.service) == 0 {
		debug.SetGCPercent(feedGCPercent)
	}
	r, fd, err := newRing(o.slots, slotBytesFor(first, o.run.batch, o.slotBytes))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	rp.Store(r)
	return f.sendRing(fd, helloLine{Op: "hello", Slots: o.slots, SlotBytes: r.slotBytes, Files: names.files, SlotNames: names.slots,
		Windowed: names.windowed, Metrics: names.metrics})
}

// startFeedPipeline builds the pipeline of feed's flags, resumed from
// states or started at --epoch; done closes it and what it runs on.
func startFeedPipeline(ctx context.Context, o feedOptions, states []actors.State, changed func(string) bool) (*actors.Pipeline, feedNames, func(), error) {
	rs, err := newRunScope(ctx, &o.run, changed)
	if err != nil {
		return nil, feedNames{}, nil, err
	}
	scope := rs.scope
	scope.Options.Resume, scope.Options.Epoch = states, o.epoch
	closers := []func(){func() { scope.Close() }}
	done := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if svc := scope.Options.Service; svc != nil {
		node, err := o.run.node.listenNode()
		if err != nil {
			done()
			return nil, feedNames{}, nil, err
		}
		closers = append([]func(){func() { node.Close() }}, closers...) // after the pipeline: it ends its sessions through the node
		scope.Options.System = node.System()
		svc.MaxMessage = o.run.node.maxMessage
	}
	if err := scope.Run(ctx, rs.startup); err != nil {
		done()
		return nil, feedNames{}, nil, err
	}
	stages := scope.Reader(rs.reader).Stages()
	p, err := actors.NewContext(ctx, stages, scope.Options)
	if err != nil {
		done()
		return nil, feedNames{}, nil, err
	}
	closers = append(closers, func() { p.Close() })
	return p, feedNames{files: baseNames(stages), slots: slotNames(ctx, stages), windowed: windowedLine(p, o.run.orWindow)}, done, nil
}

// feedNames are what the loader is told: the names of sample ids' files and
// of the slots, why it shuffles in a window (helloLine.Windowed), and where
// the metrics are served.
type feedNames struct {
	files, slots []string
	windowed     string
	metrics      string // where the metrics are served, if they are
}

// slotNames are the slots' names where the data has them (readers'
// SlotNames): read from the first file's first record. nil otherwise.
func slotNames(ctx context.Context, stages []actors.Stage) []string {
	f, ok := stages[0].(actors.Files)
	if !ok || len(f.Paths) == 0 {
		return nil
	}
	r, err := readers.Open(f.Paths[0], readers.OpenOptions{})
	if err != nil {
		return nil
	}
	defer r.Close()
	named, ok := r.(interface{ SlotNames() []string })
	if !ok {
		return nil
	}
	if _, err := r.Next(ctx); err != nil {
		return nil
	}
	return named.SlotNames()
}

// feedEpoch feeds one pass: its epoch line and state, a batch line and
// the state after it for every batch, and an end line and the state after
// the epoch. The ring is made at the first batch of the feed, sized by it.
func feedEpoch(ctx context.Context, fc *feedConn, rp *atomic.Pointer[ring], p *actors.Pipeline, o feedOptions, names feedNames) error {
	st, err := p.State()
	if err != nil {
		return err
	}
	start, err := json.Marshal(st) // before Next: the first batch is taken with it
	if err != nil {
		return err
	}
	batches, err := p.Batches()
	if err != nil {
		return err
	}
	whole, err := p.WholeBatches()
	if err != nil {
		return err
	}
	left, err := p.Left()
	if err != nil {
		return err
	}
	head := epochLine{Op: "epoch", Epoch: st.Epoch, Batches: batches, Whole: whole, Evicted: evictedSoFar()}
	for _, l := range left {
		head.Left = append(head.Left, l.IDs...)
	}
	it, err := p.Next(ctx)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err == nil && rp.Load() == nil {
		if err := fc.makeRing(rp, o, it, names); err != nil {
			return err
		}
	}
	if err := fc.linesFlushed(head, start); err != nil {
		return err
	}
	r := rp.Load()
	for ; err == nil; it, err = p.Next(ctx) {
		slot, terr := r.take(ctx)
		if terr != nil {
			return terr
		}
		d, perr := r.put(slot, it)
		if perr != nil {
			return perr
		}
		fc.delivered.Add(int64(len(it.IDs)))
		p.Recycle(it) // copied into the slot: the next batch may be made in it
		if err := fc.stateLine(d, p); err != nil {
			return err
		}
	}
	if !errors.Is(err, io.EOF) {
		return err
	}
	end := map[string]any{"op": "end", "epoch": st.Epoch}
	if ev := evictedSoFar(); ev != nil {
		end["evicted"] = ev
	}
	return fc.stateLine(end, p)
}

// stateLine sends v and then the pipeline's state as it stands, and
// flushes: the loader sees each batch as soon as it is in its slot.
func (f *feedConn) stateLine(v any, p *actors.Pipeline) error {
	st, err := p.State()
	if err != nil {
		return err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return f.linesFlushed(v, b)
}

// linesFlushed sends v, then the state st (JSON), and flushes.
func (f *feedConn) linesFlushed(v any, st []byte) error {
	f.line(v)
	f.raw(st)
	if err := f.flush(); err != nil {
		return fmt.Errorf("%w: %w", errLoaderGone, err)
	}
	return nil
}
