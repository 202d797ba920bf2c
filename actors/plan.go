package actors

import (
	"context"
	"fmt"
	"runtime"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/internal/protocol"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// lastBeforeBuffer says whether stage i is the last one, or the last before
// the double buffer.
func lastBeforeBuffer(stages []Stage, i int) bool {
	if i == len(stages)-1 {
		return true
	}
	_, buffer := stages[i+1].(DoubleBuffer)
	return buffer && i+1 == len(stages)-1
}

// mapRecycles reports whether stage i is a sample map right after the
// batch stage whose results the consumers step and hand back: it makes
// each result in a stepped one's storage (Samples.Storage), and the batch
// stage makes its batches afresh (they are the map's input, not stepped).
// Not with Devices.Storage, whose batches the batch stage makes.
func mapRecycles(stages []Stage, i int, dev *Devices) bool {
	if i < 1 || i >= len(stages) || dev != nil && (!dev.Recycle || dev.Storage != nil) {
		return false
	}
	m, ok := stages[i].(Map)
	_, batch := stages[i-1].(Batch)
	return ok && m.Samples != nil && batch && lastBeforeBuffer(stages, i)
}

// recyclesBlocks reports whether the batch stage at i is the one copy of the
// file readers' groups (the stages before it are a source and shuffles,
// which never read the bytes), so that their blocks may be recycled once it
// joined them (blockPool); limit is how many idle blocks to keep: about as
// many as the stages before hold at once.
func recyclesBlocks(stages []Stage, i int, opts Options, pieces int) (limit int, ok bool) {
	if i < 1 {
		return 0, false
	}
	switch s := stages[0].(type) {
	case Files:
		threads, buffer := s.readers(pieces)
		limit = buffer + threads*opts.ReaderWindow
	case Generator:
		limit = 3 + opts.ReaderWindow
	default:
		return 0, false
	}
	for _, s := range stages[1:i] {
		sh, ok := s.(Shuffle)
		if !ok {
			return 0, false
		}
		// The window being filled and the one handed on (see Shuffle's
		// capacity in plan), and the partly used groups at their edges;
		// with lanes, as much again a lane for the groups the deal stage
		// and the lanes' links hold in flight (generous: a block past the
		// limit goes to the collector, not back to a reader).
		limit += opts.Lanes * (2*((sh.Window+opts.GroupSize-1)/opts.GroupSize) + 2)
	}
	return limit, true
}

// MinConsumerQueue is the fewest batches a device, or the pipeline's sink,
// may hold queued behind a double buffer: its demand window is
// max(DoubleBuffer.Window, MinConsumerQueue). A consumer tells its actor
// what it consumed in steps of half its window, and the actor grants the
// double buffer that much demand in one message; at 4, one message stands
// for two batches, which halves the acknowledgements, the most frequent
// message (docs/performance.md).
const MinConsumerQueue = 4

// consumerWindow is the demand window of the pipeline's consumers.
func consumerWindow(stages []Stage, opts Options) int {
	if db, ok := stages[len(stages)-1].(DoubleBuffer); ok {
		return max(db.window(), MinConsumerQueue)
	}
	return opts.Window
}

// spawnable is one planned actor.
type spawnable struct {
	name     string
	cell     *cell
	producer func(upstream *actor.PID, workers []*actor.PID) actor.Actor
	workers  bool // a file reader: the next source stage gets its PID
	sink     *consumerCell
	deal     bool                   // the deal stage: it feeds the lanes' first stages
	dealt    bool                   // a lane's first stage: the deal stage feeds it
	toMerge  bool                   // a lane's last stage: it feeds the merge stage
	lanes    func(ups []*actor.PID) // the merge stage: told the lanes' last stages
}

// plan creates the cells of every stage, in spawn order (sources first).
func (p *Pipeline) plan(ctx context.Context, stages []Stage, dev *Devices) ([]spawnable, error) {
	consumers := 1
	if dev != nil {
		consumers, p.pipe.budget = dev.N, newStepBudget(dev.Steps)
	}
	if err := p.planOrder(ctx, stages); err != nil {
		return nil, err
	}
	stages = p.ordered(stages)
	p.pipe.order, p.pipe.commits.order = p.order, p.order
	lanes := p.pipe.opts.Lanes
	if p.pipe.opts.Service != nil {
		n := laneStages(stages)
		sp, err := p.planService(stages, n)
		if err != nil {
			return nil, err
		}
		rest, err := p.planStages(stages, n, len(stages), dev, consumers, -1)
		if err != nil {
			return nil, err
		}
		return append(append([]spawnable{sp}, rest...), p.planConsumers(stages, dev, consumers)...), nil
	}
	if lanes == 1 {
		plan, err := p.planStages(stages, 0, len(stages), dev, consumers, -1)
		if err != nil {
			return nil, err
		}
		return append(plan, p.planConsumers(stages, dev, consumers)...), nil
	}
	plan, err := p.planLanes(stages, dev, consumers)
	if err != nil {
		return nil, err
	}
	return append(plan, p.planConsumers(stages, dev, consumers)...), nil
}

// planLanes plans a chain with lanes (lanes.go): the stages up to the
// order's assembly, the deal stage, each lane's copy of the stages up to
// the double buffer, the merge stage, and the rest.
func (p *Pipeline) planLanes(stages []Stage, dev *Devices, consumers int) ([]spawnable, error) {
	first, n := laneFirst(stages), laneStages(stages)
	plan, err := p.planStages(stages, 0, first, dev, consumers, -1)
	if err != nil {
		return nil, err
	}
	plan = append(plan, p.planDeal(first))
	var lasts []string
	for l := range p.pipe.opts.Lanes {
		lp, err := p.planStages(stages, first, n, dev, consumers, l)
		if err != nil {
			return nil, err
		}
		lp[0].dealt, lp[len(lp)-1].toMerge = true, true
		lasts = append(lasts, lp[len(lp)-1].name)
		plan = append(plan, lp...)
	}
	plan = append(plan, p.planMerge(stages, n, lasts))
	rest, err := p.planStages(stages, n, len(stages), dev, consumers, -1)
	if err != nil {
		return nil, err
	}
	return append(plan, rest...), nil
}

// planStages plans stages [from, to) of the chain; with lane >= 0, as that
// lane's copies (named after it).
func (p *Pipeline) planStages(stages []Stage, from, to int, dev *Devices, consumers, lane int) ([]spawnable, error) {
	var plan []spawnable
	for i := from; i < to; i++ {
		name := fmt.Sprintf("%d-%s", i, stages[i].kind())
		if lane >= 0 {
			name = laneName(lane, name)
		}
		switch s := stages[i].(type) {
		case Files, Generator, Queue:
			src, err := p.planSource(name, s)
			if err != nil {
				return nil, err
			}
			plan = append(plan, src...)
		case DoubleBuffer:
			plan = append(plan, p.planDoubleBuffer(name, s, consumers))
		case XMap:
			plan = append(plan, p.planXMap(name, s, lane))
		default:
			plan = append(plan, p.planTransform(name, stages, i, dev, lane))
		}
	}
	return plan, nil
}

// pieces is how many pieces of work a source's readers share: in the
// order, the order's splits; without it, the files.
func (p *Pipeline) pieces(s Stage) int {
	f, ok := s.(Files)
	switch {
	case !ok:
		return 1
	case p.order != nil:
		return p.order.Ord.Splits()
	}
	return len(f.Paths)
}

// planSource plans a source: its file readers, then their coordinator.
func (p *Pipeline) planSource(name string, s Stage) ([]spawnable, error) {
	pipe, opts := p.pipe, p.pipe.opts
	var src recordSource
	var threads, buffer int
	var slots []readers.SlotSpec
	files := 1
	switch s := s.(type) {
	case Files:
		src, files, slots = p.files, len(s.Paths), s.Slots
		if p.gather != nil {
			src = p.gather
		}
		threads, buffer = s.readers(p.pieces(s))
	case Generator:
		src, threads = &fileSource{entries: []string{s.Name}, names: []string{s.Name}, indexes: map[int]*recordio.Index{},
			open: func(context.Context, string) (readers.Reader, error) { return s.New() }}, 1
	case Queue:
		src, threads = queueSource{q: s.Queue}, 1
		p.queues, p.opened = append(p.queues, s.Queue), append(p.opened, s.Queue.Opened())
	}
	if buffer == 0 {
		buffer = 3 * threads
	}
	pipe.source = src
	var plan []spawnable
	for w := range threads {
		wc := newWorkerCell(pipe, fmt.Sprintf("%s/reader-%d", name, w), src, opts.ReaderWindow)
		wc.slots = slots
		p.cells = append(p.cells, &wc.cell)
		plan = append(plan, spawnable{name: wc.name, cell: &wc.cell, workers: true,
			producer: func(*actor.PID, []*actor.PID) actor.Actor { return &workerActor{c: wc} }})
	}
	c := &cell{name: name, kind: KindFiles, pipe: pipe}
	fc := &protocol.FilesMachine{Name: name, Src: src, Files: files, Buffer: buffer, Window: opts.ReaderWindow, Effects: stageEffects(c)}
	if p.order != nil {
		fc.Ordered, fc.Units = true, &protocol.Units{Plan: &p.order.Plan}
		if !p.order.shuffled {
			// No Shuffle stage follows to assemble the windows: this
			// stage does. A window leaves at once, as about Span/unit
			// items, references into groups held anyway; as a shuffle
			// stage does, it holds them unsent while its readers fill the
			// next window. Counted against the buffer, they would stop the
			// readers until they drained, and the stages after would wait
			// for a window.
			fc.Windows = p.order.Windows(p.aligned > 0, opts.GroupSize)
			fc.Units.OnJob = fc.Windows.Add
			fc.Buffer += fc.Windows.Items()
		}
	}
	p.cells = append(p.cells, c)
	return append(plan, spawnable{name: name, cell: c, producer: func(_ *actor.PID, workers []*actor.PID) actor.Actor {
		fc.Workers = workers
		return &machineActor{c: c, m: fc}
	}}), nil
}

// planDoubleBuffer plans the double buffer before the consumers.
func (p *Pipeline) planDoubleBuffer(name string, s DoubleBuffer, consumers int) spawnable {
	window := s.window()
	c := &cell{name: name, kind: KindDoubleBuffer, pipe: p.pipe}
	// A feed queue's next pass is what its producer pushes once the
	// trainer has Reset into it: read ahead, it would pop the closed
	// queue's end (an empty pass) or the next pass's items into this one.
	// The source is planned before the double buffer, so p.queues is
	// known here.
	fc := &protocol.FanoutMachine{Name: name, Outs: make([]protocol.Outlet, consumers), Window: window, DropPartial: s.DropPartial,
		ReadsAhead: len(p.queues) == 0, Effects: stageEffects(c)}
	fc.In.Window = int64(consumers * window)
	p.cells = append(p.cells, c)
	return spawnable{name: name, cell: c, producer: func(up *actor.PID, _ []*actor.PID) actor.Actor {
		fc.In.Pub = up
		return &machineActor{c: c, m: fc}
	}}
}

// planXMap plans an xmap stage, its defaults applied; lane >= 0 in a lane.
func (p *Pipeline) planXMap(name string, s XMap, lane int) spawnable {
	if s.Workers == 0 {
		s.Workers = runtime.NumCPU()
	}
	if s.Buffer == 0 {
		s.Buffer = s.Workers
	}
	s.Ordered = s.Ordered || p.order != nil
	c := &cell{name: name, kind: KindXMap, pipe: p.pipe}
	xm := protocol.NewXMapMachine(name, s.Workers+s.Buffer, s.Ordered, p.pipe.opts.Capacity, p.pipe.opts.Window)
	xm.In.Lane, xm.Effects = uint32(max(lane, 0)), stageEffects(c)
	p.cells = append(p.cells, c)
	return spawnable{name: name, cell: c, producer: func(up *actor.PID, _ []*actor.PID) actor.Actor {
		xm.In.Pub = up
		return &xmapActor{c: c, m: xm, fn: sampleMap(s.Fn, s.Samples), workers: s.Workers}
	}}
}

// planTransform plans stage i, a shuffle, batch, map or multi-pass stage.
func (p *Pipeline) planTransform(name string, stages []Stage, i int, dev *Devices, lane int) spawnable {
	pipe, opts := p.pipe, p.pipe.opts
	c := &cell{name: name, kind: stages[i].kind(), pipe: pipe}
	tc := &protocol.RelayMachine{Relay: protocol.Relay{Name: name, Capacity: opts.Capacity}, Effects: stageEffects(c)}
	tc.In.Window, tc.In.Lane = int64(opts.Window), uint32(max(lane, 0))
	switch s := stages[i].(type) {
	case Shuffle:
		tc.Logic = &protocol.ShuffleLogic{Window: s.Window, Seed: s.Seed, Group: opts.GroupSize}
		// A full window leaves at once, as about Window/GroupSize items.
		// They are references into groups the stage holds anyway, so it
		// holds them unsent and goes on filling the next window while the
		// batch stage works through them; with Capacity alone it would
		// wait for them to drain.
		tc.Capacity += (s.Window + opts.GroupSize - 1) / opts.GroupSize
		if p.order != nil && i == 1 { // the order's windows, assembled here
			w := p.order.Windows(p.aligned > 0, opts.GroupSize)
			tc.Logic = &protocol.OrderLogic{Windows: *w}
			tc.Capacity = opts.Capacity + w.Items()
		}
	case Batch:
		tc.Logic = p.planBatch(s, stages, i, dev)
	case Map:
		tc.Logic = &mapLogic{fn: sampleMap(s.Fn, s.Samples), pipe: pipe, recycles: mapRecycles(stages, i, dev)}
	case MultiPass:
		tc.Logic = &protocol.MultiPassLogic{PassSplit: p.passSplit(stages, i)}
	}
	tc.In.Reach = int64(tc.Capacity)
	p.cells = append(p.cells, c)
	return spawnable{name: name, cell: c, producer: func(up *actor.PID, _ []*actor.PID) actor.Actor {
		tc.In.Pub = up
		return &machineActor{c: c, m: tc}
	}}
}

// planBatch makes the batch stage's logic, and the pools its storage is
// recycled through when it may be.
func (p *Pipeline) planBatch(s Batch, stages []Stage, i int, dev *Devices) *batchLogic {
	pipe, opts := p.pipe, p.pipe.opts
	// With lanes, every item leaves a lane as one batch: the merge stage
	// drops the last short one.
	bl := &batchLogic{size: s.Size, dropLast: s.DropLast && opts.Lanes <= 1, pipe: pipe, aligned: i == p.aligned}
	if limit, ok := recyclesBlocks(stages, i, opts, p.pieces(stages[0])); ok {
		if pipe.blocks == nil { // the lanes' batch stages share it
			pipe.blocks = newBlockPool(limit)
		}
		bl.blocks = pipe.blocks
	}
	pipe.counting = true
	if dev != nil && dev.Storage != nil && pipe.storage == nil {
		pipe.storage = newStoragePool(dev.Storage)
	}
	// A pipeline read by Next recycles what its reader gives back
	// (Pipeline.Recycle); one that feeds devices, when they allow it: into
	// this stage's batches, or a sample map's results after it.
	bl.reuses = lastBeforeBuffer(stages, i)
	if (dev == nil || dev.Recycle || dev.Storage != nil) && (bl.reuses || mapRecycles(stages, i+1, dev)) && pipe.recycled == nil {
		// As many as may be alive at once (docs/memory.md): a batch is
		// made in fresh storage only when none is free, so storage never
		// exceeds the peak of live batches.
		prefetch := opts.Window
		if db, ok := stages[len(stages)-1].(DoubleBuffer); ok {
			prefetch = db.window()
		}
		consumers := 1
		if dev != nil {
			consumers = dev.N
		}
		alive := opts.Lanes*(opts.Capacity+opts.Window*((opts.GroupSize+s.Size-1)/s.Size)) + consumers*(2*prefetch+consumerWindow(stages, opts))
		if opts.Lanes > 1 {
			alive += p.mergeHolds()
		}
		pipe.recycled = make(chan tensor.Slots, alive)
	}
	return bl
}

// planConsumers plans the consumers: the devices, or the handle's sink.
func (p *Pipeline) planConsumers(stages []Stage, dev *Devices, consumers int) []spawnable {
	window := consumerWindow(stages, p.pipe.opts)
	var plan []spawnable
	for d := range consumers {
		kind, name := KindSink, "sink"
		var run *deviceRun
		if dev != nil {
			kind, name = KindDevice, fmt.Sprintf("device-%d", d)
			st := &deviceCounter{st: DeviceStats{Device: d}}
			p.devices = append(p.devices, st)
			run = &deviceRun{step: dev.Step, stepTime: dev.StepTime, stats: st}
		}
		cc := newConsumerCell(p.pipe, name, kind, uint32(d), uint32(consumers), window)
		p.sinks = append(p.sinks, cc)
		p.cells = append(p.cells, &cc.cell)
		plan = append(plan, spawnable{name: name, cell: &cc.cell, sink: cc, producer: func(up *actor.PID, _ []*actor.PID) actor.Actor {
			cc.in.Pub = up
			return &consumerActor{c: cc, device: run}
		}})
	}
	return plan
}
