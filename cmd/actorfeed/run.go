package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/program"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/service"
	"github.com/actorfeed/actorfeed/supervisor"
)

// runOptions are run's flags.
type runOptions struct {
	spec      string
	data      []string
	features  string // --features: a TFRecord spec for entries without one
	batch     int
	shuffle   int
	global    bool // --shuffle all or auto
	orWindow  int  // --shuffle auto: the window where the files are not read by position
	mapName   string
	seed      uint64
	passes    int
	threads   int
	lanes     int
	devices   int
	device    string
	step      time.Duration
	anyOrder  bool
	dropLast  bool
	rank      int
	world     int
	remainder string
	// globalBatch, when not 0, deals each pass in global steps of this
	// many samples, --batch becoming this rank's slice (actors.Shard).
	globalBatch int
	blend       blendFlags
	resume      []string
	ckpt        string
	ckptEvery   int
	maxBatch    int
	onCorrupt   string
	emitIDs     string
	every       time.Duration
	watch       watchOptions
	service     []string
	credit      int
	node        nodeFlags
}

// runHelp is the run command's long help.
const runHelp = `Runs open_files -> shuffle -> batch -> double buffer -> N devices over the
files given with --data (paths, globs or s3://bucket/key URLs and patterns,
each optionally prefixed format:; docs/storage.md), or
any program written in YAML (--spec; docs/programs.md). Devices take --step per
batch. It shows progress while it runs and ends with a summary: samples,
batches, samples/s, each device's busy fraction and data-wait p50/p95,
restarts and skipped records. --emit-ids writes one JSON line per consumed
batch, {"epoch":E,"device":D,"seq":S,"ids":["<file>#<record>",...]} (S the
batch's index in its epoch; files named relative to the deepest directory that
holds them all), from which exactly-once delivery can be checked.

The order of the samples is a function of the files, --seed and the pass
(docs/determinism.md). --rank and --world give this process its share when
several read the files together. --checkpoint saves where the run stands, at
the end, on SIGTERM, SIGINT or SIGHUP (from the first moment: the job's start
if nothing was consumed), and every --checkpoint-every batches. --resume
continues exactly: from this rank's own state, or from the states of every
rank of the stopped job, on any --world, whatever step each rank stopped at.
--passes counts the job's passes: a resumed run does those left.`

func newRun() *cobra.Command {
	o := runOptions{}
	cmd := &cobra.Command{
		Use:   "run [--spec FILE.yaml] [--data FILES...] [flags]",
		Short: "Run a pipeline on simulated devices and report how it went",
		Long:  runHelp,
		Example: `  actorfeed gen --out data --files 4 --samples 20000
  actorfeed run --data 'data/*.recordio' --batch 64 --devices 2 --step 2ms --passes 3
  actorfeed run --spec pipeline.yaml --emit-ids ids.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(cmd); err != nil {
				return usageError{err}
			}
			return runPipeline(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o, cmd.Flags().Changed)
		},
	}
	o.flags(cmd.Flags())
	return cmd
}

// flags registers the command's flags on o.
func (o *runOptions) flags(f *pflag.FlagSet) {
	f.StringVar(&o.spec, "spec", "", "YAML program to run (docs/programs.md)")
	o.pipelineFlags(f)
	f.IntVar(&o.passes, "passes", 1, "passes over the data")
	f.IntVar(&o.devices, "devices", 1, "device consumers")
	f.DurationVar(&o.step, "step", 0, "simulated step time of a device per batch")
	f.StringVar(&o.device, "device", "sim", "sim: simulated devices (--step); cuda: the machine's GPUs (device d on GPU d mod their number), batches made in page-locked memory, copied and checksummed on the GPU")
	f.BoolVar(&o.anyOrder, "any-order", false, "hand records on as the readers deliver them: no deterministic order, no state to resume from")
	f.StringVar(&o.emitIDs, "emit-ids", "", "write the ids of every consumed batch to this file, as JSON lines")
	f.StringSliceVar(&o.resume, "resume", nil, "continue from the states saved by --checkpoint: this rank's own, or every rank's of the stopped job (files or globs; repeat or comma-separate)")
	f.StringVar(&o.ckpt, "checkpoint", "", "save the pipeline's state in this file at the end, on a stop, and every --checkpoint-every batches")
	f.IntVar(&o.ckptEvery, "checkpoint-every", 0, "batches between checkpoints (0: only at the end or a stop)")
	f.IntVar(&o.maxBatch, "max-batches", 0, "stop once the devices stepped this many batches, as a trainer stops at a step (0: no limit)")
	f.DurationVar(&o.every, "progress-every", 5*time.Second, "interval of the progress lines when not on a terminal")
	o.watch.flags(f)
}

// pipelineFlags registers the flags that shape the pipeline, which feed
// shares with run (checkPipeline checks them).
func (o *runOptions) pipelineFlags(f *pflag.FlagSet) {
	f.Var(entriesValue{&o.data}, "data", "files or globs to read, each optionally format:path; braces as WebDataset's shard lists, shard-{000000..000099}.tar (repeat or comma-separate)")
	f.StringVar(&o.features, "features", "", "the features to read from TFRecord files, name=kind[shape],... (kind bytes, float or int64; docs/formats.md); default: a file's first record's")
	f.IntVar(&o.batch, "batch", 64, "batch size")
	o.shuffle = 1024
	f.Var(shuffleValue{&o.shuffle, &o.global, &o.orWindow}, "shuffle", "shuffle window (0 keeps the order); all: each epoch a uniformly random permutation of every record, read by position (IDX, TFRecord, WebDataset; docs/determinism.md); auto: all where the files are read by position, else a window of 4096")
	f.StringVar(&o.mapName, "map", "", "a map to run on every batch, after the batch stage (normalize: uint8 images to float32 in [0, 1]; to_tensor: as torchvision gives them, float32 [B, C, H, W] images and int64 labels; decode(size=224,crop=random,flip,normalize=imagenet): decode and augment each sample's JPEG or PNG, docs/formats.md); with --service, on the workers")
	f.Uint64Var(&o.seed, "seed", 1, "shuffle seed")
	f.IntVar(&o.threads, "threads", 0, "file-reader threads: in the order they share the files' chunks, with --any-order a file each (default #cpus, at least 8 over s3:// objects, at most the chunks or files)")
	f.IntVar(&o.lanes, "lanes", 0, "copies of the batch and map stages, run side by side to use more cores, each taking its turn at the order's batches; the order does not change. "+
		"Each lane past the first holds a few batches more: its stages' and its links' windows (docs/memory.md). "+
		"Default: a lane a core while the data has 16 MiB a lane (min(#cpus, data/16 MiB)); 1 with --spec, --service or --any-order")
	f.BoolVar(&o.dropLast, "drop-last", false, "drop a last batch shorter than --batch")
	f.StringVar(&o.onCorrupt, "on-corrupt", "fail", "what a corrupt record does: fail or skip")
	f.IntVar(&o.rank, "rank", 0, "this process's rank among --world ranks that read the files together")
	f.IntVar(&o.world, "world", 1, "how many ranks read the files together, each an equal, disjoint share of every pass")
	f.StringVar(&o.remainder, "remainder", "drop", "what the records left over when ranks get equal shares do: drop, or pad (repeat the first ones, marked)")
	f.IntVar(&o.globalBatch, "global-batch", 0, "deal each pass in global steps of this many samples among the --world ranks: step k is the same samples on any world, so a job resized between steps trains on the same batches; "+
		"this rank's batch is its slice of a step (the global batch over the world, or one more), in place of --batch; needs --shuffle all, auto over positional files, or 0 (docs/tokens.md)")
	o.blend.flags(f)
	f.StringSliceVar(&o.service, "service", nil, "read and batch on these workers (actorfeed serve), host:port each, instead of in this process; the batches and their order are the same; unless GOGC is set, a heap floor of 64 MiB (the collector first runs near 128 MiB; docs/distributed.md)")
	f.IntVar(&o.credit, "credit", actors.DefaultServiceCredit, "with --service: batches of a task a worker may send ahead of the devices")
	o.node.flags(f, service.DefaultListen, "with --service: host:port this process listens on for the workers' answers")
}

func (o *runOptions) check(cmd *cobra.Command) error {
	switch {
	case o.spec == "" && len(o.data) == 0:
		return fmt.Errorf("give the files to read with --data, or a program with --spec")
	case o.spec != "" && len(o.blend.weights) > 0:
		return fmt.Errorf("--weights and --spec exclude each other: a program gives open_files its weights")
	case o.spec != "" && len(o.data) > 0:
		return fmt.Errorf("--data and --spec exclude each other: a program names its own files")
	}
	if o.spec != "" {
		for _, name := range []string{"batch", "shuffle", "map", "seed", "threads", "any-order", "drop-last", "features"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s has no effect with --spec: the program sets it (docs/programs.md)", name)
			}
		}
	}
	switch {
	case o.device != "sim" && o.device != "cuda":
		return fmt.Errorf("--device %q: want sim or cuda", o.device)
	case o.device == "cuda" && o.step != 0:
		return fmt.Errorf("--step simulates a device: it has no effect with --device cuda")
	case o.step < 0:
		return fmt.Errorf("--step must not be negative")
	case o.every <= 0:
		return fmt.Errorf("--progress-every must be positive")
	}
	if err := o.watch.check(); err != nil {
		return err
	}
	if err := checkInts(
		intFlag{"--passes", o.passes, 1, math.MaxInt32},
		intFlag{"--devices", o.devices, 1, actors.MaxConcurrency},
		intFlag{"--checkpoint-every", o.ckptEvery, 0, math.MaxInt32},
		intFlag{"--max-batches", o.maxBatch, 0, math.MaxInt32},
	); err != nil {
		return err
	}
	if o.ckptEvery > 0 && o.ckpt == "" {
		return fmt.Errorf("--checkpoint-every needs --checkpoint FILE")
	}
	return o.checkPipeline(cmd.Flags().Changed)
}

// checkPipeline checks the flags that shape the pipeline, which feed
// shares with run.
func (o *runOptions) checkPipeline(changed func(string) bool) error {
	if o.mapName != "" {
		if err := checkMap(o.mapName); err != nil {
			return err
		}
	}
	if err := checkInts(
		intFlag{"--batch", o.batch, 1, actors.MaxBatch},
		intFlag{"--shuffle", o.shuffle, 0, actors.MaxWindow},
		intFlag{"--threads", o.threads, 0, actors.MaxConcurrency},
		intFlag{"--lanes", o.lanes, 0, actors.MaxConcurrency},
		intFlag{"--world", o.world, 1, actors.MaxWorld},
		intFlag{"--rank", o.rank, 0, o.world - 1},
		intFlag{"--credit", o.credit, 1, actors.MaxQueue},
	); err != nil {
		return err
	}
	if _, err := order.ParseRemainder(o.remainder); err != nil {
		return fmt.Errorf("--remainder: %w", err)
	}
	if err := o.checkGlobalBatch(changed); err != nil {
		return err
	}
	if len(o.blend.weights) > 0 && !changed("shuffle") {
		o.global, o.orWindow = true, 0 // a blend reads by position
	}
	if _, err := supervisor.ParseCorruptPolicy(o.onCorrupt); err != nil {
		return fmt.Errorf("--on-corrupt: %w", err)
	}
	return nil
}

// checkGlobalBatch checks --global-batch, and makes --batch the rank's
// slice of a step.
func (o *runOptions) checkGlobalBatch(changed func(string) bool) error {
	if o.globalBatch == 0 {
		return nil
	}
	switch {
	case changed("batch"):
		return fmt.Errorf("--batch and --global-batch exclude each other: with a global batch each rank batches its slice of a step (%d samples over %d ranks)", o.globalBatch, o.world)
	case o.spec != "":
		return fmt.Errorf("--global-batch has no effect with --spec: the program's batch stage sets the batch")
	case o.globalBatch < o.world || o.globalBatch > actors.MaxBatch:
		return fmt.Errorf("--global-batch %d is out of range: it must be from --world (%d) to %d, so that every rank takes a sample of every step", o.globalBatch, o.world, actors.MaxBatch)
	}
	rem, _ := order.ParseRemainder(o.remainder)
	o.batch = actors.Shard{Rank: o.rank, World: o.world, Remainder: rem, GlobalBatch: o.globalBatch}.StepBatch()
	return nil
}

// intFlag is an integer flag's value and the range it must be in.
type intFlag struct {
	flag        string
	v, min, max int
}

// checkInts names the first flag out of its range: one flag a message.
func checkInts(flags ...intFlag) error {
	for _, f := range flags {
		if f.v < f.min || f.v > f.max {
			return fmt.Errorf("%s %d is out of range: it must be from %d to %d", f.flag, f.v, f.min, f.max)
		}
	}
	return nil
}

// expand resolves --data (readers.Expand): braces, then globs of files
// or objects, each file once. A malformed entry is a usage error; listing
// objects is bounded by objectListing.
func expand(ctx context.Context, entries []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, objectListing)
	defer cancel()
	out, err := readers.Expand(ctx, entries)
	if errors.Is(err, readers.ErrBadEntry) || errors.Is(err, readers.ErrUnknownFormat) {
		return nil, usageError{fmt.Errorf("--data %w", err)}
	}
	if err != nil {
		return nil, fmt.Errorf("--data %w", err)
	}
	return out, nil
}

// objectListing bounds listing a pattern's objects, every page and retry.
const objectListing = 5 * time.Minute

// flagProgram is the program the flags describe.
func flagProgram(o runOptions, files []string) *program.Program {
	ops := []program.Op{{Type: "open_files", Out: []string{"files"},
		Attrs: map[string]any{"file_names": files, "thread_num": o.threads, "any_order": o.anyOrder}}}
	maps.Copy(ops[0].Attrs, o.blend.attrs())
	in := "files"
	if o.shuffle > 1 || o.global {
		size := any(o.shuffle)
		switch {
		case o.global && o.orWindow > 0:
			size = "auto"
		case o.global:
			size = "all"
		}
		ops = append(ops, program.Op{Type: "create_shuffle_reader", In: in, Out: []string{"shuffled"},
			Attrs: map[string]any{"buffer_size": size, "seed": int(o.seed)}})
		in = "shuffled"
	}
	ops = append(ops, program.Op{Type: "create_batch_reader", In: in, Out: []string{"batches"}, Attrs: map[string]any{"batch_size": o.batch, "drop_last": o.dropLast}})
	in = "batches"
	if o.mapName != "" {
		ops = append(ops, program.Op{Type: "create_map_reader", In: in, Out: []string{"mapped"}, Attrs: map[string]any{"map": o.mapName}})
		in = "mapped"
	}
	ops = append(ops, program.Op{Type: "create_double_buffer_reader", In: in, Out: []string{"reader"}})
	return &program.Program{Ops: ops}
}

func runPipeline(ctx context.Context, out, errOut io.Writer, o runOptions, changed func(string) bool) error {
	rs, err := newRunScope(ctx, &o, changed)
	if err != nil {
		return err
	}
	scope := rs.scope
	defer scope.Close()
	if svc := scope.Options.Service; svc != nil {
		node, err := o.node.listenNode()
		if err != nil {
			return err
		}
		defer func() {
			scope.Close() // the pipeline first: it ends its sessions through the node
			node.Close()
		}()
		scope.Options.System = node.System()
		svc.MaxMessage = o.node.maxMessage // the workers must send nothing this node drops
		o.service = svc.Workers
	}
	if err := rs.checkOutputs(o); err != nil {
		return err
	}
	if err := scope.Run(ctx, rs.startup); err != nil {
		return rs.notStarted(ctx, o, err)
	}
	stages := scope.Reader(rs.reader).Stages()
	if len(rs.resume.states) > 0 {
		left, why := passesLeft(o.passes, rs.resume.firstEpoch(), stages)
		if left == 0 {
			fmt.Fprintln(out, why)
			return nil
		}
		o.passes = left
	}
	s := &session{devices: o.devices, passes: o.passes, stepTime: o.step, names: baseNames(stages), watch: o.watch, log: out,
		maxBatches: o.maxBatch, rank: scope.Options.Shard.Rank}
	var gpu *gpus
	if o.device == "cuda" {
		if gpu, err = openGPUs(o.devices); err != nil {
			return err
		}
		defer gpu.close() // after the pipeline, which s.finish closes
		s.step, s.storage = gpu.step, gpu.storage()
	}
	if err := s.prepareOutputs(o.emitIDs, o.ckpt, stages); err != nil {
		return err
	}
	defer s.emit.close()
	if err := s.launch(ctx, scope, rs.reader); err != nil {
		return rs.notStarted(ctx, o, err)
	}
	if o.ckpt != "" {
		if _, err := s.p.State(); err != nil {
			return fmt.Errorf("--checkpoint: %w", err)
		}
		s.ckpt = newCheckpointer(o.ckpt, o.ckptEvery, func() *actors.Pipeline { return s.p })
	}
	fmt.Fprintf(out, "pipeline: %s%s on %d device(s), step %v, %d pass(es)\n", describe(stages), runsOn(s.p, o.service), o.devices, o.step, o.passes)
	if line := windowedLine(s.p, o.orWindow); line != "" {
		fmt.Fprintln(out, line)
	}
	s.progress = newProgress(errOut, o.every, s.samplesToCome(stages, o.passes))
	err = s.finish(ctx, out, s.run(ctx, nil))
	if err == nil && gpu != nil {
		err = gpu.report(out)
	}
	return err
}

// runScope is what run runs: the scope, its startup program, the name of
// the reader the devices read, and the state --resume gave.
type runScope struct {
	scope   *program.Scope
	startup *program.Program
	reader  string
	resume  resumed
	files   []string // the data files, as --data or the program names them
}

// newRunScope makes the run's scope and program, from --spec or from the
// flags, with the shard and the service the flags ask for when the program
// does not say.
func newRunScope(ctx context.Context, o *runOptions, changed func(string) bool) (runScope, error) {
	policy, _ := supervisor.ParseCorruptPolicy(o.onCorrupt)
	opts := actors.Options{OnCorrupt: policy, Lanes: o.lanes}
	res, err := readStates(o.resume, maxStatesBytes)
	if err != nil {
		return runScope{}, err
	}
	opts.Resume = res.states
	rs := runScope{scope: program.NewScope(opts), reader: "reader", resume: res}
	rs.scope.Maps, rs.scope.SampleMaps = builtinMaps, sampleMaps
	rem, _ := order.ParseRemainder(o.remainder)
	rs.scope.Options.Shard = actors.Shard{Rank: o.rank, World: o.world, Remainder: rem, GlobalBatch: o.globalBatch}
	if o.spec != "" {
		if rs.startup, rs.reader, err = loadSpec(o, rs.scope, changed); err == nil {
			rs.files = programFiles(ctx, rs.startup)
		}
	} else {
		var entries []string
		if entries, err = expand(ctx, o.data); err == nil {
			entries, err = withFeatures(entries, o.features)
		}
		if err == nil {
			err = o.blend.check(len(entries), o.globalBatch > 0)
		}
		if err == nil {
			rs.startup, rs.files = flagProgram(*o, entries), entryPaths(entries)
			if o.lanes == 0 {
				rs.scope.Options.Lanes = autoLanes(*o, rs.files)
			}
		}
	}
	if err != nil {
		// A stop while the files were being found (a list of a million
		// names, a listing) leaves the state as a stop before the build
		// does; the outputs have not been checked against the inputs yet,
		// so only over no file or a state (a checkpoint of the job).
		if o.ckpt != "" && stateOrNothing(o.ckpt) {
			err = rs.notStarted(ctx, *o, err)
		}
		rs.scope.Close()
		return runScope{}, err
	}
	if len(o.service) > 0 {
		rs.scope.Options.Service = &actors.Service{Workers: o.service, Credit: o.credit}
	}
	return rs, nil
}

// laneBytes is the data a lane is given by default: at 784-byte samples
// and batches of 64, about 330 batches a pass, so that a lane's actors
// have work for more than the few milliseconds spawning them takes.
const laneBytes = 16 << 20

// autoLanes is --lanes' default for a run of files from the flags: a lane
// a core, as long as each has laneBytes of the data; 1 where lanes are
// refused (--service: the workers are the lanes; --any-order: the readers'
// groups are not cut into batches before the batch stage, so a lane could
// not make one batch of each).
func autoLanes(o runOptions, files []string) int {
	if len(o.service) > 0 || o.anyOrder {
		return 1
	}
	// Sizes are summed only as far as they change the answer: a list of a
	// million names is not stated a million times, and one that cannot
	// be stated ends the sum (building the pipeline names it).
	var total int64
	most := int64(runtime.NumCPU())
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			break
		}
		if total += st.Size(); total >= most*laneBytes {
			break
		}
	}
	return int(max(1, min(most, total/laneBytes)))
}

// checkOutputs refuses, as a bad command line, two outputs on one path
// and an output on an input: --emit-ids and --checkpoint on each other, or
// on a --resume state or a data file. --checkpoint may replace the state
// it resumes from when that is this rank's own alone (a re-queued job's
// command); the states of several ranks are read by every new rank, so
// their checkpoints go to new files.
func (rs runScope) checkOutputs(o runOptions) error {
	outs := map[string]string{"--emit-ids": o.emitIDs, "--checkpoint": o.ckpt}
	if o.emitIDs != "" && o.ckpt != "" && atomicfile.Same(o.emitIDs, o.ckpt) {
		return usageError{fmt.Errorf("--emit-ids and --checkpoint are both %s: give each its own file", o.ckpt)}
	}
	for _, flag := range []string{"--emit-ids", "--checkpoint"} {
		out := outs[flag]
		if out == "" {
			continue
		}
		if err := atomicfile.Refuse(out, rs.files...); err != nil {
			return usageError{fmt.Errorf("%s: %w: it would be overwritten", flag, err)}
		}
		for i, in := range rs.resume.files {
			own := flag == "--checkpoint" && len(rs.resume.states) == 1 && rs.resume.states[i].Layout.World == max(rs.scope.Options.Shard.World, 1)
			switch {
			case !atomicfile.Same(out, in) || own:
			case flag == "--checkpoint":
				return usageError{fmt.Errorf("--checkpoint %s is a --resume state, which every rank of the resumed job reads: write the new job's to new files", out)}
			default:
				return usageError{fmt.Errorf("%s %s is a --resume state: it would be overwritten", flag, out)}
			}
		}
	}
	return nil
}

// stateOrNothing says whether path names no file, or a state.
func stateOrNothing(path string) bool {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return true
	}
	_, _, err := readState(path)
	return err == nil
}

// notStarted ends a run whose pipeline could not be built or started: a
// refused state names its file; a run stopped by a signal before its
// pipeline was built leaves its state with --checkpoint all the same (the
// state it resumed from, or the job's start), so that the job can be
// resumed whenever it is stopped.
func (rs runScope) notStarted(ctx context.Context, o runOptions, err error) error {
	if err = rs.resume.refused(err); o.ckpt == "" || context.Cause(ctx) == nil {
		return err
	}
	if st, ok := rs.resume.early(rs.scope.Options.Shard); ok {
		if werr := writeState(o.ckpt, st); werr != nil {
			return errors.Join(err, fmt.Errorf("--checkpoint: %w", werr))
		}
	}
	return err
}

// programFiles are the local files a program's ops name (file_names),
// braces and globs expanded, for the outputs to refuse to overwrite them;
// an entry that does not expand is left to the op, which says why.
func programFiles(ctx context.Context, prog *program.Program) []string {
	var out []string
	for _, op := range prog.Ops {
		var names []string
		switch n := op.Attrs["file_names"].(type) {
		case []string:
			names = n
		case []any:
			for _, e := range n {
				if e, ok := e.(string); ok {
					names = append(names, e)
				}
			}
		}
		for _, e := range names {
			if _, path, _ := readers.ParseEntry(e); objstore.IsURL(path) {
				continue
			}
			if files, err := readers.Expand(ctx, []string{e}); err == nil {
				out = append(out, entryPaths(files)...)
			}
		}
	}
	return out
}

// entryPaths are the paths of format:path entries.
func entryPaths(entries []string) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		_, out[i], _ = readers.ParseEntry(e)
	}
	return out
}

// runsOn says where the stages before the double buffer run, when not in
// one lane here.
func runsOn(p *actors.Pipeline, workers []string) string {
	if len(workers) > 0 {
		return fmt.Sprintf(" on %d worker(s) of the service", len(workers))
	}
	if n := p.Lanes(); n > 1 {
		return fmt.Sprintf(" in %d lanes", n)
	}
	return ""
}

// finish ends a run that ended with err: it stops the devices, writes the
// last checkpoint and the ids, and prints the summary, unless the run
// failed. ctx is the command's (a signal stops it).
func (s *session) finish(ctx context.Context, out io.Writer, err error) error {
	s.p.Close() // the devices write ids: stop them before the file is closed
	if cerr := s.ckpt.final(); err == nil {
		err = cerr // written whatever the run's end: a stop is never worse than the last checkpoint
	}
	switch {
	case err == nil && s.p.Stopped():
		err, s.stopped = nil, errMaxBatches // the run did what it was asked
	case err != nil && context.Cause(ctx) == nil:
		return err
	default:
		s.stopped = context.Cause(ctx)
	}
	s.summary(out)
	if cerr := s.emit.close(); err == nil {
		err = cerr
	}
	return err
}

// loadSpec reads the --spec program: its startup program and the reader
// the devices read; the spec's devices, passes and shard apply unless
// flags set them.
func loadSpec(o *runOptions, scope *program.Scope, changed func(string) bool) (*program.Program, string, error) {
	spec, err := parseSpecFile(o.spec)
	if err != nil {
		return nil, "", err
	}
	if spec.Shard != nil && !changed("rank") && !changed("world") && !changed("remainder") {
		scope.Options.Shard = *spec.Shard
	}
	if spec.Service != nil && !changed("service") {
		svc := *spec.Service
		if changed("credit") {
			svc.Credit = o.credit
		}
		scope.Options.Service = &svc
	}
	feed := spec.Feed()
	if spec.Devices != nil {
		if !changed("devices") {
			o.devices = feed.N
		}
		if !changed("step") {
			o.step = feed.Step
		}
	}
	if (spec.Devices != nil || spec.Main != nil) && !changed("passes") {
		o.passes = feed.Passes
	}
	return &spec.Startup, feed.Reader, nil
}

// parseSpecFile reads and parses the YAML program at path, its relative
// file paths resolved against the file's directory.
func parseSpecFile(path string) (*program.Spec, error) {
	data, err := readSpec(path)
	if err != nil {
		return nil, err
	}
	spec, err := program.Parse(data)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", path, err)}
	}
	spec.ResolvePaths(filepath.Dir(path))
	return spec, nil
}

// readSpec reads a YAML program: a regular file (a named pipe would block),
// and no more of it than a spec may hold.
func readSpec(path string) ([]byte, error) {
	f, _, err := format.OpenFile("spec", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, program.MaxSpecBytes+1)) // Parse refuses a spec that fills it
}

// windowedLine says why --shuffle auto shuffles in a window; "" when it
// is the global order.
func windowedLine(p *actors.Pipeline, window int) string {
	why := p.Windowed()
	if why == nil {
		return ""
	}
	if e, ok := errors.AsType[*readers.NotPositionalError](why); ok {
		return fmt.Sprintf("shuffle: in a window of %d records, not the global order: %s %s (for the global order, %s)", window, e.File, e.Why, e.Fix)
	}
	return fmt.Sprintf("shuffle: in a window of %d records, not the global order: %v", window, why)
}

// describe names a chain of stages.
func describe(stages []actors.Stage) string {
	parts := make([]string, len(stages))
	for i, st := range stages {
		switch st := st.(type) {
		case actors.Files:
			parts[i] = fmt.Sprintf("open_files(%d files)", len(st.Paths))
		case actors.Shuffle:
			parts[i] = fmt.Sprintf("shuffle(%d)", st.Window)
			switch {
			case st.Global && st.OrWindow > 0:
				parts[i] = fmt.Sprintf("shuffle(all, or %d)", st.OrWindow)
			case st.Global:
				parts[i] = "shuffle(all)"
			}
		case actors.Batch:
			parts[i] = fmt.Sprintf("batch(%d)", st.Size)
		case actors.MultiPass:
			parts[i] = fmt.Sprintf("multi_pass(%d)", st.Passes)
		case actors.DoubleBuffer:
			parts[i] = "double_buffer"
		case actors.Generator:
			parts[i] = "random_data"
		case actors.Queue:
			parts[i] = "feed_queue"
		case actors.Map:
			parts[i] = fmt.Sprintf("map(%s)", st.Name)
		case actors.XMap:
			parts[i] = fmt.Sprintf("xmap(%s, %d workers)", st.Name, st.Workers)
		default:
			parts[i] = fmt.Sprintf("%T", st)
		}
	}
	return strings.Join(parts, " -> ")
}

// samplesToCome is the samples this run will deliver in passes passes, or
// -1. In the order the pipeline's state says it (this rank's share, less
// what a resumed pass delivered already) from the index it read; otherwise
// the files' indexes are read for it.
func (s *session) samplesToCome(stages []actors.Stage, passes int) int64 {
	st, err := s.p.State()
	if err != nil {
		return countSamples(stages, passes)
	}
	rem, _ := order.ParseRemainder(st.Remainder)
	share := st.Layout.Share(st.Rank, rem)
	full := int64(order.Full(st.Data.Records, st.Layout.World, st.Layout.GlobalBatch).Share(st.Rank, rem))
	per := int64(epochsPerPass(stages))
	// The rest of the state's epoch, the rest of the pass it is in, then
	// whole passes.
	return int64(share-st.Done) + (per-int64(st.Epoch)%per-1)*full + int64(passes-1)*per*full
}

// passesLeft is how many of the job's passes (--passes, of epochsPerPass
// epochs each) a run resumed from st does, the first from the state; 0,
// and why, when none is left.
func passesLeft(passes, epoch int, stages []actors.Stage) (int, string) {
	per := epochsPerPass(stages)
	if epoch >= passes*per {
		return 0, fmt.Sprintf("nothing to do: the state is at epoch %d, and the job has %d pass(es) of %d epoch(s)", epoch, passes, per)
	}
	return passes - int(epoch/per), ""
}

// epochsPerPass is how many of the order's epochs one pass of stages
// reads: the product of its multi-pass stages' passes.
func epochsPerPass(stages []actors.Stage) int {
	n := 1
	for _, st := range stages {
		if mp, ok := st.(actors.MultiPass); ok {
			n *= mp.Passes
		}
	}
	return n
}

// countSamples is the samples the run will deliver when the files say so
// (RecordIO keeps a count per chunk), or -1.
func countSamples(stages []actors.Stage, passes int) int64 {
	f, ok := stages[0].(actors.Files)
	if !ok {
		return -1
	}
	n := int64(0)
	for _, e := range f.Paths {
		name, path, err := readers.ParseEntry(e)
		if err != nil || (name != "" && name != "recordio") || (name == "" && formatOf(path) != "recordio") {
			return -1
		}
		fh, size, err := format.OpenFile("recordio", path) // never blocks on a named pipe
		if err != nil {
			return -1
		}
		idx, err := recordio.LoadIndex(fh, size, path)
		fh.Close()
		if err != nil {
			return -1
		}
		n += int64(idx.NumRecords)
	}
	return n * int64(epochsPerPass(stages)) * int64(passes)
}
