package actors

import (
	"sync"
	"unsafe"
	"weak"

	"github.com/actorfeed/actorfeed/messages"
)

// blockPool recycles the storage of the file readers' stacked groups
// (tensor.Stack): a group's block goes back to the readers once the batch
// stage has copied every one of its rows into batches. Without it every
// group is a fresh allocation of about GroupSize samples' bytes, and the
// garbage collector's cycles that this allocation drives were the largest
// single cost of a pass.
//
// A block is recycled only when nothing can read it again. Its rows are
// read by exactly one copy each, the batch stage's join, and only when the
// stages between the readers and the batch stage are shuffles, which move
// references and never look at the bytes (the pipeline makes a pool only
// then). A join is counted once: the batch stage counts it after the join
// succeeded, together with the state change that removes the rows from its
// pending instances, so a restarted batch stage never joins them again;
// its upstream replays only items it had not taken in, which hold no row
// it joined. Blocks whose rows are not all joined (a Reset mid-pass, a
// dropped last batch, a reassigned file's abandoned group) are never
// recycled: the garbage collector frees them as before.
//
// The pool keeps nothing alive: it finds a block by its address and holds
// it by a weak pointer, so a block that is never recycled leaves an entry
// that a later sweep removes once the collector has freed the block. (The
// weak pointer is made only for blocks the pool registered, never for a
// part's storage, which may not be Go memory.)
type blockPool struct {
	mu     sync.Mutex
	live   map[uintptr]blockUse // by the address of the block's first byte
	sweep  int                  // sweep the live entries when there are more than this
	free   [][]byte             // blocks whose rows were all joined
	limit  int                  // most blocks kept in free
	reused int                  // blocks handed out by alloc
}

// blockUse is a registered block: the block, weakly, its size, and the
// rows still to join.
type blockUse struct {
	block weak.Pointer[byte]
	size  int
	left  int
}

// newBlockPool keeps up to limit blocks for reuse.
func newBlockPool(limit int) *blockPool {
	return &blockPool{live: map[uintptr]blockUse{}, sweep: 64, limit: limit}
}

// alloc is a tensor.Stack's allocator: a recycled block of size bytes, or
// nil.
func (p *blockPool) alloc(size int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.free) - 1; i >= 0; i-- {
		if b := p.free[i]; len(b) == size {
			p.free[i] = p.free[len(p.free)-1]
			p.free[len(p.free)-1] = nil
			p.free = p.free[:len(p.free)-1]
			p.reused++
			return b
		}
	}
	return nil
}

// reusedCount is how many blocks alloc handed out; 0 for a nil pool.
func (p *blockPool) reusedCount() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reused
}

// register notes that block, from tensor.Stack.TakeBlock, holds a group of
// rows that the batch stage will join.
func (p *blockPool) register(block []byte, rows int) {
	if len(block) == 0 || rows <= 0 {
		return
	}
	first := unsafe.SliceData(block)
	use := blockUse{block: weak.Make(first), size: len(block), left: rows}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.live) >= p.sweep {
		for k, u := range p.live {
			if u.block.Value() == nil { // never joined in full, and collected
				delete(p.live, k)
			}
		}
		p.sweep = max(64, 2*len(p.live))
	}
	// An entry at this address already is a collected block's.
	p.live[uintptr(unsafe.Pointer(first))] = use
}

// joined counts the rows refs name as copied for good, and recycles the
// blocks that have none left to copy. counts is scratch space, reused
// across calls.
func (p *blockPool) joined(refs []messages.Ref, counts *partCounts) {
	counts.reset()
	for _, r := range refs {
		counts.add(r.Part)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range counts.list {
		s := c.part.GetSlots()
		if len(s) == 0 || len(s[0].GetData()) == 0 {
			continue
		}
		first := unsafe.SliceData(s[0].GetData())
		key := uintptr(unsafe.Pointer(first))
		u, ok := p.live[key]
		// The part refers to its storage, so a registered block at this
		// address is alive, and its weak pointer's value is this address;
		// otherwise the storage is not a registered block (a record of its
		// own, a block collected and its address reused).
		if !ok || u.block.Value() != first {
			continue
		}
		if u.left -= c.rows; u.left > 0 {
			p.live[key] = u
			continue
		}
		delete(p.live, key)
		if len(p.free) < p.limit {
			p.free = append(p.free, unsafe.Slice(first, u.size))
		}
	}
}

// partCounts counts the rows a join copied from each part.
type partCounts struct {
	list  []partCount
	index map[*messages.Part]int // once there are too many parts to search
}

type partCount struct {
	part *messages.Part
	rows int
}

func (c *partCounts) reset() {
	clear(c.list)
	c.list = c.list[:0]
	clear(c.index)
}

func (c *partCounts) add(part *messages.Part) {
	if len(c.list) > 16 {
		if c.index == nil {
			c.index = make(map[*messages.Part]int)
		}
		if len(c.index) == 0 {
			for k, pc := range c.list {
				c.index[pc.part] = k
			}
		}
		if k, ok := c.index[part]; ok {
			c.list[k].rows++
			return
		}
		c.index[part] = len(c.list)
		c.list = append(c.list, partCount{part: part, rows: 1})
		return
	}
	for k := len(c.list) - 1; k >= 0; k-- {
		if c.list[k].part == part {
			c.list[k].rows++
			return
		}
	}
	c.list = append(c.list, partCount{part: part, rows: 1})
}
