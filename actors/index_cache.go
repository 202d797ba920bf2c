package actors

import (
	"context"
	"os"
	"sync"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// DefaultIndexCacheFiles is NewIndexCache's limit when given none.
const DefaultIndexCacheFiles = 1 << 16

// IndexCache keeps files' indexes for the pipelines that read the same files
// again: a Service worker's tasks, each a pipeline of its own over the job's
// files, or a trainer that builds a pipeline for every epoch. A pipeline
// with Options.Indexes opens and indexes a file only when the cache holds
// no index of it for the file as it is now (os.Stat of the entry's path:
// the same file, size and modification time), so that a file rewritten or
// replaced is indexed again. An entry whose path os.Stat cannot describe
// (one a custom Options.Open maps elsewhere) is indexed every time. It is
// safe for concurrent pipelines; it holds at most its limit of files and
// forgets one at random past that.
type IndexCache struct {
	mu    sync.Mutex
	limit int
	files map[string]cachedIndex
	hits  int64
}

// cachedIndex is one file's index, its splits' File left 0.
type cachedIndex struct {
	stat   os.FileInfo
	x      fileIndex
	chunks *recordio.Index // nil for a format without a chunk index
}

// NewIndexCache returns a cache of at most limit files' indexes (limit <= 0:
// DefaultIndexCacheFiles).
func NewIndexCache(limit int) *IndexCache {
	if limit <= 0 {
		limit = DefaultIndexCacheFiles
	}
	return &IndexCache{limit: limit, files: map[string]cachedIndex{}}
}

// Hits is how many times a pipeline found a file's index in the cache.
func (c *IndexCache) Hits() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

// statEntry describes entry's file now; ok is false when it cannot.
func statEntry(entry string) (os.FileInfo, bool) {
	_, path, err := readers.ParseEntry(entry)
	if err != nil {
		return nil, false
	}
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return nil, false
	}
	return st, true
}

// get returns the index of entry, file f of its pipeline, when the cache
// holds one for st.
func (c *IndexCache) get(entry string, f int, st os.FileInfo) (fileIndex, *recordio.Index, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.files[entry]
	if !ok || !os.SameFile(e.stat, st) || e.stat.Size() != st.Size() || !e.stat.ModTime().Equal(st.ModTime()) {
		return fileIndex{}, nil, false
	}
	c.hits++
	x := e.x
	x.splits = splitsOfFile(e.x.splits, f)
	return x, e.chunks, true
}

// splitsOfFile is a copy of splits as those of file f.
func splitsOfFile(splits []order.Split, f int) []order.Split {
	out := make([]order.Split, len(splits))
	for i, s := range splits {
		s.File = f
		out[i] = s
	}
	return out
}

// put keeps x, entry's index as of st.
func (c *IndexCache) put(entry string, st os.FileInfo, x fileIndex, chunks *recordio.Index) {
	kept := x
	kept.splits = splitsOfFile(x.splits, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.files[entry]; !ok && len(c.files) >= c.limit {
		for k := range c.files { // a random one: map order
			delete(c.files, k)
			break
		}
	}
	c.files[entry] = cachedIndex{stat: st, x: kept, chunks: chunks}
}

// indexCached is indexRetried through opts.Indexes, when it is set and the
// entry names a file: the file is stat'ed before it is indexed, so that a
// change while it is read makes the next pipeline index it again.
func (s *fileSource) indexCached(ctx context.Context, f int, opts Options) (fileIndex, error) {
	c := opts.Indexes
	if c == nil {
		return s.indexRetried(ctx, f, opts)
	}
	st, ok := statEntry(s.entries[f])
	if !ok {
		return s.indexRetried(ctx, f, opts)
	}
	if x, chunks, ok := c.get(s.entries[f], f, st); ok {
		if chunks != nil {
			s.mu.Lock()
			s.indexes[f] = chunks
			s.mu.Unlock()
		}
		return x, nil
	}
	x, err := s.indexRetried(ctx, f, opts)
	if err == nil {
		s.mu.Lock()
		chunks := s.indexes[f]
		s.mu.Unlock()
		c.put(s.entries[f], st, x, chunks)
	}
	return x, err
}
