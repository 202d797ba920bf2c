package actors

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers/order"
)

// StateVersion is the version of State this package writes and reads.
const StateVersion = 1

// ErrState is wrapped when a pipeline cannot give its State (its source is
// not files, or a stage does not keep its items' places in the order), or
// cannot resume from one (another version, data set or order).
var ErrState = errors.New("actors: no resumable state")

// State is where a pipeline stands in its order: the position after the
// last item its consumers committed (a device's step returned, or Next
// returned it), in a few hundred bytes whatever the data set or the
// shuffle window. Marshal it with encoding/json next to a model checkpoint;
// Options.Resume continues exactly there, with any number of readers,
// workers or devices, and with another Shard.World: the rest of the epoch
// is then re-dealt among the new ranks, which needs every rank at the same
// position with nothing committed past it (Beyond empty), as a synchronous
// trainer's ranks are. Items prefetched but not committed are delivered
// again after a resume, once.
type State struct {
	Version int `json:"version"`
	// The order: these must match the resuming pipeline's.
	Seed     uint64 `json:"seed"`
	Window   int    `json:"window"`
	Shuffled bool   `json:"shuffled"`
	// Global is a global order's (Shuffle.Global); absent for a windowed one.
	Global bool `json:"global,omitempty"`
	// Blend is a blend's (Files.Blend): its positions an epoch and the
	// sum of its weights and phases; absent without one.
	Blend     *BlendState `json:"blend,omitempty"`
	Unit      int         `json:"unit"` // positions per item: the batch size
	Remainder string      `json:"remainder"`
	Data      Fingerprint `json:"data"`
	// Where the pipeline stands.
	Epoch  int          `json:"epoch"`
	Layout order.Layout `json:"layout"` // how the epoch's positions are dealt
	Rank   int          `json:"rank"`
	// Done is how many positions of its shard the rank delivered and its
	// consumers committed in this epoch; every rank of a synchronous
	// trainer has the same.
	Done uint64 `json:"done"`
	// Beyond are the first positions of items past Done that were
	// committed too (devices commit out of order): a resume skips them.
	// There are at most as many as the items in flight. Past the epoch's
	// share (Layout.Share) they are in the epochs after it, a multi-pass
	// stage's: share+k is position k of the next epoch.
	Beyond []uint64 `json:"beyond,omitempty"`
	// Fresh marks the state of a rank stopped before it delivered
	// anything, before its files were indexed (FreshState): only Version,
	// Layout.World and Rank are set.
	Fresh bool `json:"fresh,omitempty"`
}

// BlendState identifies a blend in a State.
type BlendState struct {
	Samples uint64 `json:"samples"`
	Sum     string `json:"sum"`
}

// Positions is the positions of an epoch of st's order: a blend's
// samples, or the data set's records.
func (st *State) Positions() uint64 {
	if st.Blend != nil {
		return st.Blend.Samples
	}
	return st.Data.Records
}

// blendState is the state's Blend of p's order.
func (p *orderPlan) blendState() *BlendState {
	if p.Ord.Blended() == "" {
		return nil
	}
	return &BlendState{Samples: p.Ord.Len(), Sum: p.Ord.Blended()}
}

// sameBlend says whether two states' blends (or their absence) are one.
func sameBlend(a, b *BlendState) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// start sets where pass 0 starts: where the stopped job's states say
// (Options.Resume), or at the start of epoch (Options.Epoch).
func (p *orderPlan) start(states []State, epoch int) error {
	world := p.World
	if len(states) == 0 {
		p.First, p.FirstPlan, p.FirstDone = epoch, order.Full(p.Ord.Len(), world, p.GlobalBatch), 0
		return nil
	}
	st, err := p.rejoin(states)
	if err != nil {
		return err
	}
	if st.Fresh { // nothing of the job was delivered
		return p.start(nil, 0)
	}
	p.First, p.FirstPlan, p.FirstDone, p.FirstSkip = st.Epoch, st.Layout, st.Done, slices.Clone(st.Beyond)
	return nil
}

// compatible says why st cannot resume this pipeline's order, if it cannot.
func (p *orderPlan) compatible(st *State) error {
	var why string
	switch {
	case st.Version != StateVersion:
		why = fmt.Sprintf("version %d, this build reads %d", st.Version, StateVersion)
	case !st.Data.same(p.data) && st.Data.Files == p.data.Files && st.Data.Records == p.data.Records && st.Data.Splits == p.data.Splits:
		// The sum alone differs: the same shape of data, other bytes or
		// versions. The state lists no file (it stays small), so say what
		// changes a sum, and which files were written after its data.
		why = fmt.Sprintf("it was taken over another data set, %d files and %d records as these but sum %s, these %s: since it was taken, a file was rewritten, renamed or resized, or an object replaced (its ETag changed)%s",
			st.Data.Files, st.Data.Records, st.Data.Sum, p.data.Sum, p.writtenSince(st.Data.Modified))
	case !st.Data.same(p.data):
		why = fmt.Sprintf("it was taken over another data set (%d files, %d records, sum %s; these are %d files, %d records, sum %s)%s",
			st.Data.Files, st.Data.Records, st.Data.Sum, p.data.Files, p.data.Records, p.data.Sum, p.writtenSince(st.Data.Modified))
	case st.Seed != p.Ord.Seed() || st.Window != p.Ord.Window() || st.Shuffled != p.shuffled || st.Global != p.Ord.Global():
		why = fmt.Sprintf("its order is seed %d, %s, shuffled %v; this pipeline's is seed %d, %s, shuffled %v",
			st.Seed, shuffleName(st.Global, st.Window), st.Shuffled, p.Ord.Seed(), shuffleName(p.Ord.Global(), p.Ord.Window()), p.shuffled)
	case !sameBlend(st.Blend, p.blendState()):
		why = fmt.Sprintf("its blend is %s; this pipeline's is %s: keep the weights, their phases and the samples an epoch across a resume", blendName(st.Blend), blendName(p.blendState()))
	case st.Layout.GlobalBatch != p.GlobalBatch:
		why = otherGlobalBatch(st.Layout.GlobalBatch, p.GlobalBatch)
	case st.Unit != p.Unit && p.GlobalBatch == 0: // under a global batch, the rank's slice: checked with its layout
		why = fmt.Sprintf("it was taken with %d positions an item (the batch size); this pipeline has %d", st.Unit, p.Unit)
	case st.Remainder != p.Remainder.String():
		why = fmt.Sprintf("its remainder policy is %s; this pipeline's is %s", st.Remainder, p.Remainder)
	default:
		return nil
	}
	return fmt.Errorf("cannot resume from this state: %s", why)
}

// blendName describes a blend for a refused state's message.
func blendName(b *BlendState) string {
	if b == nil {
		return "none"
	}
	return fmt.Sprintf("%d samples an epoch, sum %s", b.Samples, b.Sum)
}

// otherGlobalBatch says that a state taken with global batch had cannot
// resume a job whose global batch is has.
func otherGlobalBatch(had, has uint64) string {
	return fmt.Sprintf("it was taken with a global batch of %d samples, and this job's is %d: keep the global batch across a resume (it is what makes a step the same samples)", had, has)
}

// writtenSince names the files written after t, the newest of a refused
// state's data: the first few, and how many. Times are whole seconds
// (file_index.go), so when none is later, the files of t's second are
// named: a file replaced within the second of the newest reads as at t.
func (p *orderPlan) writtenSince(t time.Time) string {
	if t.IsZero() || p.files == nil {
		return ""
	}
	how := "written after"
	names, n := p.filesWritten(t.Before)
	if n == 0 {
		how = "written in the same second as"
		names, n = p.filesWritten(t.Equal)
	}
	if n == 0 {
		return ""
	}
	more := ""
	if n > len(names) {
		more = fmt.Sprintf(" and %d more", n-len(names))
	}
	return fmt.Sprintf("; %s the newest file of the state's data (%s): %s%s",
		how, t.UTC().Format(time.RFC3339), strings.Join(names, ", "), more)
}

// filesWritten names the first few files whose time is, and counts them.
func (p *orderPlan) filesWritten(is func(time.Time) bool) ([]string, int) {
	var names []string
	n := 0
	for f, m := range p.files.modified {
		if is(m) {
			if n++; len(names) < 3 {
				names = append(names, p.files.names[f])
			}
		}
	}
	return names, n
}

// state is the state with the line committed up to done, and the items
// starting at beyond on it, in the consumers' pass; ended, that pass was
// consumed to its end.
func (p *orderPlan) state(pass uint32, done uint64, beyond []uint64, ended bool) State {
	at, pos := p.OnLine(done)
	switch lo, hi := p.passesOf(pass); {
	case ended:
		at, pos, beyond = hi, 0, nil
	case at >= hi: // every item of the pass committed: at its last epoch's end
		at = hi - 1
		pos = done - p.Line(at, 0)
	case at < lo: // the pass's first epochs have no positions
		at, pos = lo, done-p.Line(lo, 0)
	}
	layout, _ := p.Layout(at)
	base := p.Line(at, 0)
	var rel []uint64 // from the state's epoch's start: past its share, in the epochs after
	for _, l := range beyond {
		rel = append(rel, l-base)
	}
	return State{Version: StateVersion, Seed: p.Ord.Seed(), Window: p.Ord.Window(), Shuffled: p.shuffled, Global: p.Ord.Global(), Blend: p.blendState(), Unit: p.Unit,
		Remainder: p.Remainder.String(), Data: p.data, Epoch: p.Epoch(at), Layout: layout, Rank: p.Rank, Done: pos,
		Beyond: rel}
}

// Batches is the number of items the rank's consumers receive in their
// pass, each covering Unit positions of its shard (the last of each epoch
// may cover fewer), when no record is skipped; dropLast drops a last item
// of fewer.
func (p *orderPlan) batches(pass uint32, dropLast bool) int {
	lo, hi := p.passesOf(pass)
	n := 0
	for e := lo; e < hi; e++ {
		layout, done := p.Layout(e)
		n += itemsOf(layout.Share(p.Rank, p.Remainder)-done, uint64(p.Unit), dropLast)
	}
	return n
}

// wholeBatches is what batches is for a pass dealt from its start on the
// plan's world, whatever part of it was delivered before a resume. A
// resumed pipeline's first pass is the rest of the pass it stopped in,
// which may lack epochs of a multi-pass stage, so the epochs of a whole
// pass are counted in the pass after it.
func (p *orderPlan) wholeBatches(pass uint32, dropLast bool) int {
	lo, hi := p.passesOf(pass + 1)
	layout := order.Full(p.Ord.Len(), p.World, p.GlobalBatch)
	return int(hi-lo) * itemsOf(layout.Share(p.Rank, p.Remainder), uint64(p.Unit), dropLast)
}

// itemsOf is the number of items of unit positions that cover share
// positions; dropLast drops a last item of fewer.
func itemsOf(share, unit uint64, dropLast bool) int {
	if dropLast {
		return int(share / unit)
	}
	return int((share + unit - 1) / unit)
}

// commits tracks where a pipeline's consumers stand in the order: the end,
// on the line (orderPlan.line), of the last item of the longest run of
// committed items from the start of the consumers' pass. Items commit out
// of order across devices; those past the run wait in ahead (at most the
// items in flight).
type commits struct {
	mu    sync.Mutex
	pass  uint32
	began bool
	next  int             // items committed from the pass's first
	done  uint64          // the end of item next-1, or where the pass began
	ahead map[int]placing // committed beyond next, by item
	order *orderPlan
}

// commit records that item seq of pass, message b, was consumed.
func (t *commits) commit(pass uint32, seq int, b *messages.Batch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.startLocked(pass)
	if b.Positions == 0 {
		return // no place in an order: the pipeline has no State (placed)
	}
	start := t.order.Line(b.OrderPass, b.Position)
	if seq != t.next {
		t.ahead[seq] = placing{start, start + b.Positions}
		return
	}
	t.next, t.done = t.next+1, start+b.Positions
	for at, ok := t.ahead[t.next]; ok; at, ok = t.ahead[t.next] {
		delete(t.ahead, t.next)
		t.next, t.done = t.next+1, at.end
	}
}

// placing is where an item lies on the line.
type placing struct{ start, end uint64 }

// beyondLocked are the first positions of the items committed past done.
func (t *commits) beyondLocked() []uint64 {
	var out []uint64
	for _, at := range t.ahead {
		out = append(out, at.start)
	}
	slices.Sort(out)
	return out
}

// startLocked moves the tracker to pass, if it is not there.
func (t *commits) startLocked(pass uint32) {
	if t.began && t.pass == pass {
		return
	}
	t.began, t.pass, t.next, t.ahead = true, pass, 0, map[int]placing{}
	t.done = 0
	if t.order != nil {
		first, _ := t.order.passesOf(pass)
		_, done := t.order.Layout(first)
		t.done = t.order.Line(first, done)
	}
}

// State is where the pipeline stands in its order: after the last item of
// the current pass that its consumers committed, every one before it
// committed too (a device's step returned, or Next returned it), with the
// items committed past it. After a pass ran to its end, it is the start of
// the next epoch. Call it between steps (a step that calls it sees its own
// item as not yet committed), or after Close, when it is final: a trainer
// stopped by a signal closes the pipeline, then saves its state.
//
// A pipeline has a State when its source is Files in an order (not
// AnyOrder) and every stage keeps its items' places: maps, xmaps, the
// batch stage, multi-pass stages and the double buffer do; a second
// shuffle or batch stage does not. A feed queue cannot be replayed and has
// no State. Otherwise State returns ErrState saying why. Behind a
// multi-pass stage the state is in the epoch of the pass its consumers
// stand in, and lists the items of later epochs committed already in
// Beyond, past that epoch's share.
func (p *Pipeline) State() (State, error) {
	if err := p.placed(); err != nil {
		return State{}, err
	}
	p.mu.Lock()
	pass, ended := p.pass, p.passEnded()
	p.mu.Unlock()
	t := &p.pipe.commits
	t.mu.Lock()
	t.startLocked(pass)
	done, beyond := t.done, t.beyondLocked()
	t.mu.Unlock()
	// Items a resumed pass skips (committed past the state it resumed
	// from) stay committed until the position passes them.
	for _, start := range p.order.FirstSkip {
		if start >= done && !slices.Contains(beyond, start) {
			beyond = append(beyond, start)
		}
	}
	slices.Sort(beyond)
	return p.order.state(pass, done, beyond, ended), nil
}

// placed says why the pipeline has no State, if it has none.
func (p *Pipeline) placed() error {
	switch {
	case p.order == nil && len(p.queues) > 0:
		return fmt.Errorf("%w: a feed queue cannot be replayed", ErrState)
	case p.order == nil:
		return fmt.Errorf("%w: the source is not Files in an order (a Generator, or Files.AnyOrder)", ErrState)
	case p.unplaced != "":
		return fmt.Errorf("%w: %s does not keep its items' places in the order", ErrState, p.unplaced)
	}
	return nil
}

// passEnded says whether the current pass was consumed to its end (Run
// returned nil, or Next io.EOF); p.mu must be held.
func (p *Pipeline) passEnded() bool {
	return (p.ran && p.ranPass == p.pass) || (p.drained && p.drainedPass == p.pass)
}

// Batches is how many items the consumers receive in the current pass when
// no record is skipped: each covers the batch size's worth of positions of
// the rank's shard (the last may cover fewer, and is dropped with
// Batch.DropLast). Every rank of a sharded data set gets the same number,
// known before the pass starts, so that a trainer can plan its steps. For
// a resumed pass it is what is left. It needs what State needs.
func (p *Pipeline) Batches() (int, error) {
	if err := p.placed(); err != nil {
		return 0, err
	}
	p.mu.Lock()
	pass := p.pass
	p.mu.Unlock()
	return p.order.batches(pass, p.dropLast), nil
}

// WholeBatches is Batches for the current pass dealt whole on this
// pipeline's world: after a resume part way through a pass, it counts the
// batches delivered before it too, as a trainer's len() of an epoch does.
func (p *Pipeline) WholeBatches() (int, error) {
	if err := p.placed(); err != nil {
		return 0, err
	}
	p.mu.Lock()
	pass := p.pass
	p.mu.Unlock()
	return p.order.wholeBatches(pass, p.dropLast), nil
}

// shuffleName names an order's shuffle in a refused state's message.
func shuffleName(global bool, window int) string {
	if global {
		return "a global shuffle"
	}
	return fmt.Sprintf("window %d", window)
}
