package protocol

import (
	"fmt"
	"slices"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
)

// The order (docs/determinism.md) is put together in two parts. open_files
// plans the units its readers read (units) and releases their groups in
// unit order, each marked with its place in S; the windows assembler takes
// them, permutes each window and cuts the rank's positions into items. The
// assembler runs in the Shuffle stage that follows open_files, so that the
// two run side by side, or, without one, in open_files itself. Both walk
// the same jobs of the same epoch: whatever the readers' timing, the items
// are the same.

// Units turns the rank's share of an epoch into units for the readers:
// runs of records of one file covering the windows the rank needs. Units
// are made over runs, contiguous stretches of S (the windows of consecutive
// jobs); a window needed twice (padding that wraps, a shard re-dealt
// mid-window) starts a new run and is read again.
type Units struct {
	Plan   *Plan
	ep     *order.Epoch
	walk   jobWalk
	at, hi uint64 // units cover S up to at; the run's jobs reach hi
	// OnJob, when set, is told of every job the units reach: the
	// assembler when it runs in open_files.
	OnJob func(job order.Job, run int)
}

// jobWalk walks a pass's jobs, numbering their runs: a job whose window
// does not follow the last one's in S starts a new run. The planner and the
// assembler each walk the jobs, and number them alike.
type jobWalk struct {
	jobs   *order.Jobs
	run    int
	end    uint64     // where the last job's window ends in S
	peeked *order.Job // taken from jobs, not yet given out
}

func (w *jobWalk) begin(jobs *order.Jobs) { *w = jobWalk{jobs: jobs} }

// next is the next job and its run; contiguous is whether it goes on the
// last job's run. With onlyContiguous, a job that does not is kept for the
// next call and not given out.
func (w *jobWalk) next(onlyContiguous bool) (job order.Job, run int, ok bool) {
	if w.peeked != nil {
		job, w.peeked = *w.peeked, nil
	} else if job, ok = w.jobs.Next(); !ok {
		return order.Job{}, 0, false
	}
	if w.run == 0 || job.Start != w.end {
		if onlyContiguous {
			kept := job // not job itself: the result is zeroed on return
			w.peeked = &kept
			return order.Job{}, 0, false
		}
		w.run++
	}
	w.end = job.Start + uint64(job.Len)
	return job, w.run, true
}

// begin starts pass.
func (u *Units) begin(pass uint32) {
	u.ep = u.Plan.Ord.Epoch(uint64(u.Plan.Epoch(pass)))
	u.walk.begin(u.ep.JobsOf(u.Plan.segments(pass)))
	u.at, u.hi = 0, 0
}

// extend takes the next job: into the current run, or, with fresh, into a
// new one. It reports whether it took one.
func (u *Units) extend(fresh bool) bool {
	job, run, ok := u.walk.next(!fresh)
	if !ok {
		return false
	}
	if u.hi != job.Start {
		u.at = job.Start
	}
	u.hi = job.Start + uint64(job.Len)
	if u.OnJob != nil {
		u.OnJob(job, run)
	}
	return true
}

// more makes the next unit, appending it to c.state; false when the rank's
// share is all dealt. A unit reads on as far as the file's records follow
// one another in S (a split, and the next split when it is the same file's
// next), taking the run's next windows as it goes, so that a reader opens
// a file once for a stretch of it.
func (u *Units) more(c *FilesMachine) bool {
	if u.at == u.hi && !u.extend(true) {
		return false
	}
	p := u.ep.PieceAt(u.at, u.hi)
	u.at = p.Pos + (p.To - p.From)
	// At most a few windows (the windows a unit reaches are open, and
	// held, until it is read), but never less than the rest of the split:
	// a unit that ended inside one would make the next reader of it seek
	// into the chunk, which reads and verifies the whole chunk again. A
	// long split's windows close one after the other as it is read.
	limit := max(p.From+4*uint64(u.Plan.Ord.Span()), u.ep.PieceAt(p.Pos, u.Plan.Ord.Len()).To)
	for p.To < limit && (u.at < u.hi || u.extend(false)) {
		q := u.ep.PieceAt(u.at, u.hi)
		if q.File != p.File || q.From != p.To {
			break
		}
		p.To, u.at = q.To, q.Pos+(q.To-q.From)
	}
	c.state = append(c.state, unitState{file: p.File, from: p.From, to: p.To, accepted: p.From, worker: -1, pos: p.Pos, run: u.walk.run})
	return true
}

// place marks a released group of unit st with its place in S, for the
// assembler: Position is the S position of record b.First, Positions the
// records it used up (skipped ones included), Run the unit's run.
func place(st *unitState, b *messages.Batch) {
	b.Position, b.Positions, b.Run = st.pos+(b.First-st.from), b.Count, uint32(st.run)
}

// Windows assembles the rank's items from groups marked by place: it files
// each instance under its window, and, once a window's positions are all
// in (holes included), permutes it and cuts the positions the rank
// delivers into items of unit positions (the last of the pass may have
// fewer).
type Windows struct {
	plan    *Plan
	unit    uint64
	perItem int // whole batches an item may carry (see cut)

	pass  uint32
	ep    *order.Epoch
	walk  jobWalk // when the assembler runs apart from the units
	share uint64  // the rank's positions in this pass (its shard's end)
	open  []*seqJob
	out   outGroup // the item being filled
	skip  []uint64 // the first positions of items delivered already, in order
	// cursor is the rank position after the last one handed on (holes
	// included): a job that starts elsewhere follows a jump (see follow).
	cursor uint64

	// Buffers kept from window to window: a pass allocates none.
	free []*seqJob
	refs []messages.Ref
	perm []int
}

// Windows makes the plan's assembler. Items for a batch stage that
// batches them one to one (batched) carry as many whole batches as fit in
// a group of groupSize instances; with lanes, one each, so that every item
// the deal stage hands a lane leaves it as one batch (actors/lanes.go).
func (p *Plan) Windows(batched bool, groupSize int) *Windows {
	w := &Windows{plan: p, unit: uint64(p.Unit), perItem: 1}
	if batched && p.Lanes <= 1 {
		w.perItem = max(1, groupSize/p.Unit)
	}
	return w
}

// Items is how many items a window leaves as, at most: a stage that
// assembles windows holds them unsent while it fills the next (counted in
// batches rather than in items of several, it held two windows' worth).
func (w *Windows) Items() int {
	per := w.unit * uint64(w.perItem)
	return int((uint64(w.plan.Ord.Span()) + per - 1) / per)
}

// seqJob is one window being read: its instances by window-local S
// offset, a hole where the ref has no part.
type seqJob struct {
	job    order.Job
	run    int
	refs   []messages.Ref
	ids    []uint64
	filled int // offsets that hold an instance
}

func (j *seqJob) end() uint64 { return j.job.Start + uint64(j.job.Len) }

// outGroup is the item being filled: whole batches cut already (cuts,
// their instances first in got, from rank position from), and the batch
// being filled, which starts at rank position at.
type outGroup struct {
	got     Instances
	cuts    []uint32 // instances of each whole batch in got
	held    int      // instances of got in those batches
	from    uint64
	at      uint64
	padding uint32 // of the batch being filled
}

// begin starts pass.
func (w *Windows) begin(pass uint32) {
	layout, done := w.plan.Layout(pass)
	w.pass = pass
	w.ep = w.plan.Ord.Epoch(uint64(w.plan.Epoch(pass)))
	w.walk.begin(w.ep.JobsOf(w.plan.segments(pass)))
	w.share = layout.Share(w.plan.Rank, w.plan.Remainder)
	for _, j := range w.open {
		clear(j.refs) // a Reset mid-pass: nothing holds on to its parts
	}
	w.free = append(w.free, w.open...)
	w.open = w.open[:0]
	w.out.got.Reset()
	w.out.cuts, w.out.held = w.out.cuts[:0], 0
	w.out.at, w.out.padding, w.cursor = done, 0, done
	w.skip = w.plan.Skip(pass)
}

// Add opens the window of job, in a kept job's buffers if one is free.
func (w *Windows) Add(job order.Job, run int) {
	var j *seqJob
	if n := len(w.free); n > 0 {
		j, w.free = w.free[n-1], w.free[:n-1]
	} else {
		j = &seqJob{}
	}
	j.job, j.run = job, run
	j.refs, j.ids, j.filled = j.refs[:0], j.ids[:0], 0
	w.open = append(w.open, j)
}

// fill makes room in j for its instances when the first comes: a window
// of holes only (a skipped chunk's, which may declare tens of millions of
// records) costs no memory in proportion to its length.
func (j *seqJob) fill() {
	if cap(j.refs) < j.job.Len {
		j.refs, j.ids = make([]messages.Ref, j.job.Len), make([]uint64, j.job.Len)
	}
	j.refs, j.ids = j.refs[:j.job.Len], j.ids[:j.job.Len]
	clear(j.refs) // every offset a hole until its instance comes
}

// window is the open window of run that holds S position pos; apart from
// the units, it opens the jobs up to it as they come.
func (w *Windows) window(run int, pos uint64, walk bool) *seqJob {
	for {
		for _, j := range w.open {
			if j.run == run && pos >= j.job.Start && pos < j.end() {
				return j
			}
		}
		if !walk {
			return nil
		}
		job, r, ok := w.walk.next(false)
		if !ok {
			return nil
		}
		w.Add(job, r)
	}
}

// take files a group marked by place into its windows, and hands on the
// windows it completed. walk says whether the assembler opens windows
// itself (apart from the units).
func (w *Windows) take(b *messages.Batch, walk bool) ([]*messages.Batch, error) {
	refs := w.refs[:0]
	if len(b.Ids) > 0 {
		var err error
		if refs, err = b.Refs(refs); err != nil {
			return nil, err
		}
		w.refs = refs
	}
	run := int(b.Run)
	var j *seqJob // a group's records mostly share a window: look further only when they leave it
	for i, id := range b.Ids {
		_, rec := messages.SplitID(id)
		pos := b.Position + uint64(rec) - b.First
		if j == nil || pos < j.job.Start || pos >= j.end() {
			j = w.window(run, pos, walk)
		}
		if j == nil {
			return nil, fmt.Errorf("%w: S position %d of run %d is in no window of the rank", ErrProtocol, pos, run)
		}
		if j.filled == 0 && len(j.refs) == 0 {
			j.fill()
		}
		if j.refs[pos-j.job.Start].Part == nil {
			j.filled++
		}
		j.refs[pos-j.job.Start], j.ids[pos-j.job.Start] = refs[i], id
	}
	upto := b.Position + b.Positions
	out, err := w.handDone(run, upto, nil)
	if err != nil || !walk || b.Positions == 0 {
		return out, err
	}
	// Holes may end the group: every window it reaches must be open for
	// its positions to count, the first too when it holds holes only.
	// Each is handed on as soon as it is complete, before the next opens:
	// the holes of a skipped chunk of millions of records hold one window
	// at a time, not all of them. A first window the walk reached already
	// is open or was handed on (by this group, when it completed it):
	// looking for it would open every later window of the pass.
	if w.walk.run < run || w.walk.run == run && b.Position >= w.walk.end {
		w.window(run, b.Position, walk)
	}
	for {
		if out, err = w.handDone(run, upto, out); err != nil {
			return nil, err
		}
		if w.walk.run != run || w.walk.end >= upto {
			return out, nil
		}
		job, r, ok := w.walk.next(true)
		if !ok {
			return out, nil
		}
		w.Add(job, r)
	}
}

// handDone hands on the open windows of run that end by S position upto,
// in order, appending the items they complete to out.
func (w *Windows) handDone(run int, upto uint64, out []*messages.Batch) ([]*messages.Batch, error) {
	for len(w.open) > 0 && w.open[0].run == run && w.open[0].end() <= upto {
		var err error
		if out, err = w.hand(w.open[0], out); err != nil {
			return nil, err
		}
		clear(w.open[0].refs) // the items hold the parts; the buffers are free
		w.free = append(w.free, w.open[0])
		w.open = w.open[:copy(w.open, w.open[1:])]
	}
	return out, nil
}

// hand permutes a complete window and adds its delivered positions to the
// items, part after part, appending the items it completed to out.
func (w *Windows) hand(j *seqJob, out []*messages.Batch) ([]*messages.Batch, error) {
	part := w.handPart
	if j.filled == 0 {
		part = w.handHoles
	} else {
		w.perm = w.ep.PermInto(j.job.Window, w.perm)
	}
	out, err := part(j, j.job.Part, out)
	for _, p := range j.job.More {
		if err != nil {
			break
		}
		out, err = part(j, p, out)
	}
	return out, err
}

// handPart adds part p of window j to the items.
func (w *Windows) handPart(j *seqJob, p order.Part, out []*messages.Batch) ([]*messages.Batch, error) {
	out, err := w.follow(j, p, out)
	if err != nil {
		return nil, err
	}
	w.cursor = p.At + uint64(p.Hi-p.Lo)
	at := p.At - uint64(p.Lo) // the rank position of window offset 0
	next := (p.At/w.unit + 1) * w.unit
	for i := p.Lo; i < p.Hi; i++ {
		if k := w.perm[i]; j.refs[k].Part != nil {
			w.out.got.Refs = append(w.out.got.Refs, j.refs[k])
			w.out.got.Ids = append(w.out.got.Ids, j.ids[k])
			if p.Pad {
				w.out.padding++
			}
		}
		if end := at + uint64(i) + 1; end == next {
			if out, err = w.cut(end, out); err != nil {
				return nil, err
			}
			next += w.unit
		}
	}
	return out, nil
}

// handHoles is handPart for a window of holes only (the records of a
// skipped chunk), in time independent of its length: no permutation, and
// of the item boundaries in the part, only the first (which may end an
// item holding instances from before), the second (which flushes the
// whole batches held) and the last: the cuts between them end items of
// holes, which are not sent, and only move where the next item starts.
func (w *Windows) handHoles(j *seqJob, p order.Part, out []*messages.Batch) ([]*messages.Batch, error) {
	out, err := w.follow(j, p, out)
	if err != nil {
		return nil, err
	}
	n := uint64(p.Hi - p.Lo)
	end := p.At + n
	w.cursor = end
	first := (p.At/w.unit + 1) * w.unit
	if first > end {
		return out, nil
	}
	last := end / w.unit * w.unit
	for _, b := range []uint64{first, first + w.unit, last} {
		if b <= end && b > w.out.at {
			if out, err = w.cut(b, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// follow checks that part p of window j goes on where the last part
// ended, or after a jump to a later position on an item boundary. Lanes
// that read their own stretches made such jumps; no layout is known to
// make one now, and the check stays so that one would be cut cleanly.
func (w *Windows) follow(j *seqJob, p order.Part, out []*messages.Batch) ([]*messages.Batch, error) {
	if p.At == w.cursor {
		return out, nil
	}
	// A jump ends on an item boundary: the items cut so far go, and the
	// next starts where the part does.
	if o := &w.out; p.At < w.cursor || o.got.Len() != o.held || o.at != w.cursor {
		return nil, fmt.Errorf("%w: window %d delivers from rank position %d, the last one ended at %d with an item open at %d",
			ErrProtocol, j.job.Window, p.At, w.cursor, o.at)
	}
	out, err := w.flush(out)
	if err != nil {
		return nil, err
	}
	w.out.at = p.At
	return out, nil
}

// finish hands on the last, short item of the pass; every group is in.
func (w *Windows) finish() ([]*messages.Batch, error) {
	if len(w.open) > 0 {
		return nil, fmt.Errorf("%w: the pass ended with window %d not complete", ErrProtocol, w.open[0].job.Window)
	}
	return w.cut(w.share, nil)
}

// cut ends the batch being filled at rank position end. Whole batches
// without padding travel together, perItem to a message (outGroup.cuts);
// any other batch travels alone. A batch of holes only is not sent: the
// next one's position accounts for them; nor is a batch a resumed pass
// delivered already.
func (w *Windows) cut(end uint64, out []*messages.Batch) ([]*messages.Batch, error) {
	o := &w.out
	for len(w.skip) > 0 && w.skip[0] < o.at {
		w.skip = w.skip[1:]
	}
	delivered := len(w.skip) > 0 && w.skip[0] == o.at
	n := o.got.Len() - o.held
	if n > 0 && !delivered && o.padding == 0 && end-o.at == w.unit && w.perItem > 1 {
		if len(o.cuts) == 0 {
			o.from = o.at
		}
		o.cuts, o.held, o.at = append(o.cuts, uint32(n)), o.got.Len(), end
		if len(o.cuts) < w.perItem {
			return out, nil
		}
		return w.flush(out)
	}
	out, err := w.flush(out)
	if err != nil {
		return nil, err
	}
	if n > 0 && !delivered {
		b, err := o.got.gather(w.pass, 0, n)
		if err != nil {
			return nil, err
		}
		b.Position, b.Positions, b.Padding, b.OrderPass = o.at, end-o.at, o.padding, w.pass
		w.named(b)
		out = append(out, b)
	}
	o.got.Reset() // the item holds its own rows and ids
	o.at, o.padding = end, 0
	return out, nil
}

// flush sends the whole batches cut so far: one batch as an item of its
// own, more as one item with cuts.
func (w *Windows) flush(out []*messages.Batch) ([]*messages.Batch, error) {
	o := &w.out
	if len(o.cuts) == 0 {
		return out, nil
	}
	b, err := o.got.gather(w.pass, 0, o.held)
	if err != nil {
		return nil, err
	}
	b.Position, b.Positions, b.OrderPass = o.from, uint64(len(o.cuts))*w.unit, w.pass
	w.named(b)
	if len(o.cuts) > 1 {
		b.Cuts = slices.Clone(o.cuts)
	}
	o.got.Cut(o.held)
	o.cuts, o.held = o.cuts[:0], 0
	return append(out, b), nil
}

// named gives the records of a global order's item their ids: the readers
// read them as records of the virtual file, which are G positions.
func (w *Windows) named(b *messages.Batch) {
	if !w.plan.Ord.Global() {
		return
	}
	for i, id := range b.Ids {
		if f, g := messages.SplitID(id); f == w.plan.Ord.Virtual() {
			file, rec := w.ep.At(uint64(g))
			b.Ids[i] = messages.SampleID(file, int(rec))
		}
	}
}

// OrderLogic is a Shuffle stage behind open_files in the order: the
// windows assembler, as a stage's logic.
type OrderLogic struct{ Windows Windows }

func (l *OrderLogic) Start(pass uint32)               { l.Windows.begin(pass) }
func (l *OrderLogic) UpstreamPass(pass uint32) uint32 { return pass }

func (l *OrderLogic) Take(b *messages.Batch) ([]*messages.Batch, error) {
	return l.Windows.take(b, true)
}

func (l *OrderLogic) Finish() ([]*messages.Batch, uint32, bool, error) {
	out, err := l.Windows.finish()
	return out, 0, false, err
}
