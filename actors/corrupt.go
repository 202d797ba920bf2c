package actors

import (
	"errors"
	"sync"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// CorruptChunk is a damaged part of a file that the pipeline skipped under
// supervisor.SkipCorrupt: a chunk that failed its checksum or whose header
// cannot be trusted, a file's tail past the last whole chunk, or a sample
// whose data a map could not read (an image that does not decode: Offset
// -1, Records 1, Err naming the sample).
type CorruptChunk struct {
	File   string
	Offset int64 // where the damage starts in the file; -1 for a sample
	// Records is what the damaged part held by its header, -1 where that
	// count cannot be trusted or there is no header.
	Records int
	Err     error
}

// maxCorruptListed bounds the damage a pipeline lists; it counts all.
// maxCorruptSeen bounds the chunks it remembers to count each once: past
// it, a chunk met again (in a later pass) counts again, and a hostile
// file of millions of damaged chunks costs no more memory.
const (
	maxCorruptListed = 100
	maxCorruptSeen   = 1 << 16
)

// corruptLog lists each damaged part once, whichever readers, passes or
// restarts met it.
type corruptLog struct {
	mu    sync.Mutex
	seen  map[corruptKey]struct{}
	list  []CorruptChunk
	count int
}

type corruptKey struct {
	file   string
	offset int64
	sample string // a sample's error, which names it; "" for a chunk
}

// note lists c unless it was met before.
func (l *corruptLog) note(c CorruptChunk) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := corruptKey{file: c.File, offset: c.Offset}
	if c.Offset < 0 && c.Err != nil {
		k.sample = c.Err.Error()
	}
	if _, ok := l.seen[k]; ok {
		return
	}
	if l.seen == nil {
		l.seen = map[corruptKey]struct{}{}
	}
	if len(l.seen) < maxCorruptSeen {
		l.seen[k] = struct{}{}
	}
	l.count++
	if len(l.list) < maxCorruptListed {
		l.list = append(l.list, c)
	}
}

// noteIndex lists the damage a file's chunk index found.
func (l *corruptLog) noteIndex(file string, x *recordio.Index) {
	for _, d := range x.Damage {
		l.note(CorruptChunk{File: file, Offset: d.Offset, Records: d.Records, Err: d.Err})
	}
	if extra := x.Damaged - len(x.Damage); extra > 0 {
		l.mu.Lock()
		l.count += extra
		l.mu.Unlock()
	}
}

// noteSkip lists the chunk a reader skipped past err, which declared
// records (0: unknown); an undecodable record alone is no chunk.
func (l *corruptLog) noteSkip(file string, err error, records int) {
	fe, ok := errors.AsType[*format.Error](err)
	if !ok || fe.Record >= 0 || fe.Offset < 0 {
		return
	}
	if records == 0 {
		records = -1
	}
	l.note(CorruptChunk{File: file, Offset: fe.Offset, Records: records, Err: err})
}

// snapshot is the damage listed so far and the count of all.
func (l *corruptLog) snapshot() ([]CorruptChunk, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]CorruptChunk(nil), l.list...), l.count
}
