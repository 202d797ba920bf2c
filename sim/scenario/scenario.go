package scenario

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/internal/records"
)

// Shape is the pipeline a scenario runs: files of records, read by
// open_files, optionally shuffled, mapped, batched and multi-passed, then
// double-buffered to devices, for some passes.
type Shape struct {
	Files, Records int  // records per file
	ChunkBytes     int  // RecordIO chunk size, so a file has several chunks
	Threads        int  // file readers
	AnyOrder       bool // records as the readers deliver them (otherwise in the order, deterministic)
	Group          int  // samples per file-reader message
	Shuffle        int  // window; 0 keeps the order
	// Blend, in a preempted job over token corpora, blends the files with
	// these weights (actors.Files.Blend). BlendStep, when not 0, is the
	// global step from which the weights are reversed.
	Blend     []float64
	BlendStep int
	// Global is the global order (actors.Shuffle.Global) in place of a
	// window; only over stream files, which are read by position.
	Global      bool
	XMap        int // 0: no xmap; 1: ordered; 2: unordered
	Batch       int
	DropLast    bool
	MultiPass   int // 0: none
	Devices     int
	DropPartial bool
	Recycle     bool
	Passes      int  // run passes (Reset between them)
	Skip        bool // corrupt records are skipped, not fatal
	// Ragged records carry a LoD sequence (1-3 steps) as their second slot,
	// so they do not stack: file readers send them as parts of one record
	// each, and batches are joined on the general path.
	Ragged bool
	// Window, Capacity and ReaderWindow are the pipeline's actors.Options
	// of the same names, the demand windows and stage buffers; 0 is the
	// default.
	Window, Capacity, ReaderWindow int
	// Lanes is actors.Options.Lanes (0 or 1: none); only in the order,
	// without a multi-pass stage.
	Lanes int
	// Storage gives the devices an actors.Storage that checks its use:
	// every block freed once, and none under a step (no multi-pass stage:
	// the batch stage must be last).
	Storage bool
	// Format is the files' format: "" RecordIO, "wds" WebDataset shards,
	// "tfrecord" TFRecord files (sim/internal/records).
	Format string
	// Queue makes the source a feed queue (actors.Queue, the seeds'
	// py_reader) instead of the files: a producer pushes file 0's records
	// into it, records.Sample(0, r) from r = 0, QueueLens[p] of them in
	// pass p, and closes it. A pass shorter than Records is a queue
	// closed mid-pass. Files is 1.
	Queue     bool
	QueueLens []int
	// QueueCap is the queue's capacity.
	QueueCap int
	// GlobalBatch, in a preempted job, deals every epoch in global steps
	// of this many samples (actors.Shard.GlobalBatch): each rank's batch
	// stage batches its slice of a step, so a rank's batch size is its
	// world's and rank's (Batch is unused).
	GlobalBatch int
	// QueueKill, when positive, makes the producer of the last pass kill
	// the queue (a producer's error) after that many records instead of
	// closing it: the run must fail with that error, and hand nothing out
	// twice.
	QueueKill int
}

// Fault is one injected fault; which fields matter depends on Kind.
type Fault struct {
	Kind   sim.FaultKind
	File   int
	N      int
	P      float64
	Delay  time.Duration
	Chunk  int
	Stage  string // a stage kind (actors.Kind*)
	Count  int
	Device int
}

func (f Fault) String() string {
	switch f.Kind {
	case sim.ReadError, sim.ShortRead, sim.StallRead:
		return fmt.Sprintf("%s(file %d, read %d)", f.Kind, f.File, f.N)
	case sim.ReadErrorP:
		return fmt.Sprintf("%s(file %d, p %.2f)", f.Kind, f.File, f.P)
	case sim.Latency:
		return fmt.Sprintf("%s(file %d, %v)", f.Kind, f.File, f.Delay)
	case sim.FlipChunk:
		return fmt.Sprintf("%s(file %d, chunk %d)", f.Kind, f.File, f.Chunk)
	case sim.Truncate:
		return fmt.Sprintf("%s(file %d)", f.Kind, f.File)
	case sim.StagePanic:
		return fmt.Sprintf("%s(%s, message %d)", f.Kind, f.Stage, f.N)
	case sim.PanicStorm:
		return fmt.Sprintf("%s(%s, messages %d..%d)", f.Kind, f.Stage, f.N, f.N+f.Count-1)
	case sim.SlowDevice:
		return fmt.Sprintf("%s(device %d, %v)", f.Kind, f.Device, f.Delay)
	case sim.StallDevice:
		return fmt.Sprintf("%s(device %d, step %d, %v)", f.Kind, f.Device, f.N, f.Delay)
	case sim.PanicDevice:
		return fmt.Sprintf("%s(device %d, step %d)", f.Kind, f.Device, f.N)
	}
	return string(f.Kind)
}

// Scenario is a shape, a fault schedule and the seed they came from (which
// also seeds the shuffle and the probabilistic faults).
type Scenario struct {
	Name   string // for a named regression scenario; empty for generated ones
	Seed   uint64
	Shape  Shape
	Faults []Fault
	// Preempt, when set, stops and resumes the job (GeneratePreemption).
	Preempt *Preemption
}

// Describe is the scenario's shape in a few words.
func (s Scenario) Describe() string {
	sh := s.Shape
	parts := []string{fmt.Sprintf("%dx%d %s files", sh.Files, sh.Records, cmp.Or(sh.Format, "recordio")), fmt.Sprintf("%d thr", sh.Threads)}
	if sh.Queue {
		parts = []string{fmt.Sprintf("feed queue of %d, passes of %v", sh.QueueCap, sh.QueueLens)}
		if sh.QueueKill > 0 {
			parts = append(parts, fmt.Sprintf("killed at %d", sh.QueueKill))
		}
	}
	if sh.AnyOrder {
		parts = append(parts, "any-order")
	}
	if sh.Shuffle > 1 {
		parts = append(parts, fmt.Sprintf("shuf %d", sh.Shuffle))
	}
	if sh.Global {
		parts = append(parts, "shuf all")
	}
	if sh.XMap > 0 {
		parts = append(parts, [...]string{"", "xmap", "xmap-unord"}[sh.XMap])
	}
	if len(sh.Blend) > 0 {
		parts = append(parts, fmt.Sprintf("blend %v", sh.Blend))
		if sh.BlendStep > 0 {
			parts = append(parts, fmt.Sprintf("reversed at step %d", sh.BlendStep))
		}
	}
	if sh.GlobalBatch > 0 {
		parts = append(parts, fmt.Sprintf("global batch %d", sh.GlobalBatch))
	} else {
		parts = append(parts, fmt.Sprintf("batch %d", sh.Batch))
	}
	if sh.MultiPass > 0 {
		parts = append(parts, fmt.Sprintf("multi %d", sh.MultiPass))
	}
	parts = append(parts, fmt.Sprintf("%d dev", sh.Devices), fmt.Sprintf("%d pass", sh.Passes))
	if sh.Skip {
		parts = append(parts, "skip")
	}
	if sh.Ragged {
		parts = append(parts, "ragged")
	}
	if sh.Lanes > 1 {
		parts = append(parts, fmt.Sprintf("%d lanes", sh.Lanes))
	}
	if sh.Storage {
		parts = append(parts, "storage")
	}
	if sh.Window > 0 || sh.Capacity > 0 || sh.ReaderWindow > 0 {
		parts = append(parts, fmt.Sprintf("links %d/%d/%d", sh.Window, sh.Capacity, sh.ReaderWindow))
	}
	if s.Preempt != nil {
		parts = append(parts, "preempted: "+s.Preempt.describe())
	}
	return strings.Join(parts, ", ")
}

// DescribeFaults lists the faults.
func (s Scenario) DescribeFaults() string {
	if len(s.Faults) == 0 {
		return "none"
	}
	out := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		out[i] = f.String()
	}
	return strings.Join(out, ", ")
}

// ordered says whether a run's order is a function of the scenario, to
// be compared with the fault-free run's: the order over files, or a feed
// queue's (one producer's) when no unordered xmap reorders it.
func (sh Shape) ordered() bool {
	if sh.Queue {
		return sh.XMap != 2
	}
	return !sh.AnyOrder
}

// perPass is how many epochs of the order a pass reads: a multi-pass
// stage's passes, or 1.
func (sh Shape) perPass() int { return max(sh.MultiPass, 1) }

// epochs is the job's epochs: Passes passes of perPass each.
func (sh Shape) epochs() int { return sh.Passes * sh.perPass() }

// Generate draws a random scenario from seed: the same seed always gives
// the same scenario. A fifth of them read a feed queue (drawQueue).
func Generate(seed uint64) Scenario {
	sc := generateFiles(seed)
	drawQueue(seed, &sc)
	return sc
}

// generateFiles draws a scenario over files.
func generateFiles(seed uint64) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	chance := func(p float64) bool { return rng.Float64() < p }
	sh := Shape{
		Files:      1 + rng.IntN(4),
		Records:    10 + rng.IntN(111),
		ChunkBytes: pick(200, 500, 1500, 4000),
		Threads:    1 + rng.IntN(4),
		AnyOrder:   chance(0.25),
		Group:      pick(1, 2, 4, 8, 16),
		Batch:      1 + rng.IntN(20),
		DropLast:   chance(0.2),
		Devices:    1 + rng.IntN(3),
		Recycle:    chance(0.3),
		Passes:     1 + rng.IntN(3),
		Skip:       chance(0.5),
	}
	if chance(0.6) {
		sh.Shuffle = pick(1, 10, 50, 200)
	}
	if chance(0.25) {
		sh.XMap = 1 + rng.IntN(2)
	}
	if chance(0.2) {
		sh.MultiPass = 2
	}
	sh.DropPartial = sh.Devices > 1 && chance(0.3)
	// From the seed, not the generator, so that the draws above and below
	// stay what they were before this choice existed.
	sh.Ragged = seed%4 == 3
	// The same for the links' windows and buffers: from a generator of
	// their own. Half the scenarios keep the defaults.
	links := rand.New(rand.NewPCG(seed, 0x11a5))
	if links.IntN(2) == 1 {
		sizes := []int{0, 1, 3, 4, 8}
		sh.Window, sh.Capacity, sh.ReaderWindow = sizes[links.IntN(5)], sizes[links.IntN(5)], sizes[links.IntN(5)]
	}

	sh.Lanes = drawLanes(seed, sh)
	// A third of the scenarios whose batch stage is last make their
	// batches in the devices' storage, from a generator of their own.
	sh.Storage = sh.MultiPass == 0 && rand.New(rand.NewPCG(seed, 0x5707)).IntN(3) == 0
	sh.Format = drawFormat(seed)
	drawTokens(seed, &sh)
	drawGlobal(seed, &sh)
	kinds := stageKinds(sh)
	var faults []Fault
	for range rng.IntN(5) {
		f, ok := drawFault(rng, sh, kinds, faults)
		// A stream file cut short cannot be indexed: its damaged tail is
		// RecordIO's alone (docs/reliability.md). A token corpus's bytes
		// are not damaged (every token is a valid one: damage would go
		// unseen), but its reads fail, stall and come short.
		if ok && !(f.Kind == sim.Truncate && sh.Format != "") && !(f.Kind == sim.FlipChunk && sh.Format == records.Megatron) {
			faults = append(faults, f)
		}
	}
	return Scenario{Seed: seed, Shape: sh, Faults: faults}
}

// drawTokens makes a third of the scenarios drawn over RecordIO files read
// token corpora instead (Megatron-LM indexed datasets, packed samples of
// records.SeqLen+1 tokens, records of one slot), from a generator of its
// own, so that the other draws of every seed stay what they were before
// token corpora existed.
func drawTokens(seed uint64, sh *Shape) {
	if sh.Format != "" || rand.New(rand.NewPCG(seed, 0x70c3)).IntN(3) != 0 {
		return
	}
	sh.Format, sh.Ragged = records.Megatron, false
}

// drawQueue makes a fifth of the scenarios read a feed queue, from a
// generator of its own, so that the other draws of every seed stay what
// they were before queues existed. The shape keeps what a queue can feed:
// one source, read once (no multi-pass stage, no lanes, no order across
// files), and the faults those that do not act on files (stage panics and
// storms, device faults). About a third of the passes are cut short (the
// queue closed mid-pass, perhaps before its first record), and about one
// scenario in ten has its last pass killed by the producer.
func drawQueue(seed uint64, sc *Scenario) {
	rng := rand.New(rand.NewPCG(seed, 0x9ee0))
	if rng.IntN(5) != 0 {
		return
	}
	sh := &sc.Shape
	sh.Queue, sh.Files, sh.Threads, sh.Format, sh.AnyOrder, sh.MultiPass, sh.Lanes, sh.Global = true, 1, 1, "", false, 0, 0, false
	sh.QueueCap = 1 + rng.IntN(8)
	sh.QueueLens = make([]int, sh.Passes)
	for p := range sh.QueueLens {
		sh.QueueLens[p] = sh.Records
		if rng.IntN(3) == 0 {
			sh.QueueLens[p] = rng.IntN(sh.Records + 1)
		}
	}
	if last := sh.QueueLens[sh.Passes-1]; last > 1 && rng.IntN(10) == 0 {
		sh.QueueKill = 1 + rng.IntN(last-1)
	}
	kinds := stageKinds(*sh)
	sc.Faults = slices.DeleteFunc(sc.Faults, func(f Fault) bool {
		switch f.Kind {
		case sim.StagePanic, sim.PanicStorm:
			return !slices.Contains(kinds, f.Stage)
		case sim.SlowDevice, sim.StallDevice, sim.PanicDevice:
			return false
		}
		return true
	})
}

// drawFormat gives a quarter of the scenarios WebDataset shards and a
// quarter TFRecord files, from a generator of its own, so that the other
// draws of every seed stay what they were before formats existed.
func drawFormat(seed uint64) string {
	switch rand.New(rand.NewPCG(seed, 0xf0f0)).IntN(4) {
	case 0:
		return records.WebDataset
	case 1:
		return records.TFRecord
	}
	return ""
}

// drawGlobal gives a third of the scenarios in the order over stream files
// (the formats read by position) the global order in place of their
// window, from a generator of its own, so that the other draws of every
// seed stay what they were before the global order existed.
func drawGlobal(seed uint64, sh *Shape) {
	if sh.AnyOrder || sh.Format == "" || rand.New(rand.NewPCG(seed, 0x6106a1)).IntN(3) != 0 {
		return
	}
	sh.Global, sh.Shuffle = true, 0
}

// drawLanes gives half the scenarios that can have lanes 2 or 3 of them,
// from a generator of its own, so that the other draws of every seed stay
// what they were before lanes existed.
func drawLanes(seed uint64, sh Shape) int {
	if sh.AnyOrder || sh.MultiPass > 0 {
		return 0
	}
	rng := rand.New(rand.NewPCG(seed, 0x1a4e5))
	if rng.IntN(2) == 0 {
		return 0
	}
	return 2 + rng.IntN(2)
}

// stageKinds are the kinds of the stages a scenario of shape sh runs: the
// targets a stage panic may pick.
func stageKinds(sh Shape) []string {
	kinds := []string{actors.KindFileReader, actors.KindFiles, actors.KindBatch, actors.KindDoubleBuffer, actors.KindDevice}
	if sh.Shuffle > 0 || sh.Global {
		kinds = append(kinds, actors.KindShuffle)
	}
	if sh.XMap > 0 {
		kinds = append(kinds, actors.KindXMap)
	}
	if sh.MultiPass > 0 {
		kinds = append(kinds, actors.KindMultiPass)
	}
	if sh.Lanes > 1 {
		kinds = append(kinds, actors.KindDeal, actors.KindMerge)
	}
	return kinds
}

// drawFault draws one fault for a scenario of shape sh that already has
// faults; false when the draw is one to leave out. The order of the draws
// is part of every seed's meaning: a change here changes every scenario.
func drawFault(rng *rand.Rand, sh Shape, kinds []string, faults []Fault) (Fault, bool) {
	file := rng.IntN(sh.Files)
	switch k := rng.IntN(100); {
	case k < 12:
		return Fault{Kind: sim.ReadError, File: file, N: 1 + rng.IntN(20)}, true
	case k < 20:
		// At most one per file, and rare: the first reopen after an error
		// reads every chunk header, so until the index is kept each try
		// risks the error once per chunk of the file.
		if slices.ContainsFunc(faults, func(f Fault) bool { return f.Kind == sim.ReadErrorP && f.File == file }) {
			return Fault{}, false
		}
		return Fault{Kind: sim.ReadErrorP, File: file, P: 0.001 + 0.004*rng.Float64()}, true
	case k < 27:
		return Fault{Kind: sim.Latency, File: file, Delay: time.Duration(20+rng.IntN(280)) * time.Microsecond}, true
	case k < 34:
		return Fault{Kind: sim.ShortRead, File: file, N: 1 + rng.IntN(20)}, true
	case k < 40:
		return Fault{Kind: sim.StallRead, File: file, N: 1 + rng.IntN(20)}, true
	case k < 48:
		return Fault{Kind: sim.FlipChunk, File: file, Chunk: rng.IntN(8)}, true
	case k < 51:
		return Fault{Kind: sim.Truncate, File: file}, true
	case k < 75:
		return Fault{Kind: sim.StagePanic, Stage: kinds[rng.IntN(len(kinds))], N: 1 + rng.IntN(60)}, true
	case k < 78:
		return Fault{Kind: sim.PanicStorm, Stage: kinds[rng.IntN(len(kinds))], N: 1 + rng.IntN(10), Count: stormLength}, true
	case k < 86:
		return Fault{Kind: sim.SlowDevice, Device: rng.IntN(sh.Devices), Delay: time.Duration(20+rng.IntN(300)) * time.Microsecond}, true
	case k < 93:
		return Fault{Kind: sim.StallDevice, Device: rng.IntN(sh.Devices), N: 1 + rng.IntN(10), Delay: time.Duration(5+rng.IntN(20)) * time.Millisecond}, true
	default:
		return Fault{Kind: sim.PanicDevice, Device: rng.IntN(sh.Devices), N: 1 + rng.IntN(10)}, true
	}
}
