package actors

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/supervisor"
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
	// A file read by position has one split, one read in the windowed
	// order many: each is kept apart.
	key := s.entries[f]
	if s.positional {
		key += "\x00positional"
	}
	if x, chunks, ok := c.get(key, f, st); ok {
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
		c.put(key, st, x, chunks)
	}
	return x, err
}

// fileIndex is what indexing a file found.
type fileIndex struct {
	splits  []order.Split
	records uint64
	size    int64 // -1 when the reader does not tell
	// recordBytes is a record's bytes in memory where the reader says
	// (RecordBytes: an IDX file's, a token corpus's samples); 0 otherwise.
	recordBytes int64
	version     string // an object's ETag; "" for a file
	// modified is when the file or the object's version was written:
	// a refused resume names the files written after its state's data.
	modified time.Time
}

// splitsOf lists the splits of src's files, indexing threads files at a
// time: RecordIO chunks from the file's chunk index (which the source keeps
// for its readers' seeks), runs of DefaultSplitRecords records of other
// formats, counted by reading them. Each file is opened through
// Options.Open under the readers' own rules: every call bounded by
// ReadTimeout, transient errors retried on Retry's schedule.
func splitsOf(ctx context.Context, src *fileSource, opts Options, threads int, damage *corruptLog) ([]order.Split, Fingerprint, error) {
	found := make([]fileIndex, len(src.entries))
	errs := make([]error, len(src.entries))
	var wg sync.WaitGroup
	var failed atomic.Bool
	next := make(chan int)
	for range max(threads, 1) {
		wg.Go(func() {
			for f := range next {
				if found[f], errs[f] = src.indexCached(ctx, f, opts); errs[f] != nil {
					failed.Store(true)
				}
			}
		})
	}
	// Files go out in list order, and none after a failure: the build
	// fails on the first file that failed, whose predecessors were all
	// indexed, without opening a million missing names first.
feed:
	for f := range src.entries {
		if failed.Load() {
			break
		}
		select {
		case next <- f:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, Fingerprint{}, fmt.Errorf("actors: building the pipeline: indexing its files: %w", err)
	}
	var splits []order.Split
	h := sha256.New()
	fp := Fingerprint{Files: len(src.entries)}
	for f, x := range found {
		if errs[f] == nil {
			errs[f] = src.damage(f, opts.OnCorrupt, damage)
		}
		if errs[f] != nil {
			return nil, Fingerprint{}, &StageError{Stage: "0-" + KindFiles, File: src.names[f], Offset: offsetOf(errs[f]), Record: -1,
				Class: Classify(errs[f]), Err: fmt.Errorf("indexing the file: %w", errs[f])}
		}
		splits = append(splits, x.splits...)
		fp.Records += x.records
		src.recordBytes = max(src.recordBytes, x.recordBytes)
		if x.size > 0 && x.records > 0 {
			src.recordBytes = max(src.recordBytes, x.size/int64(x.records))
		}
		// To the second, as object stores keep it; and so a state's
		// size does not depend on the clock.
		src.modified[f] = x.modified.UTC().Truncate(time.Second)
		if src.modified[f].After(fp.Modified) {
			fp.Modified = src.modified[f]
		}
		h.Write([]byte(filepath.Base(src.names[f])))
		h.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(x.size)), x.records))
		if x.version != "" { // an object: a state resumes on the version it read
			h.Write([]byte(x.version))
			src.pin(f, x.version)
		}
	}
	fp.Splits = len(splits)
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(splits))))
	fp.Sum = hex.EncodeToString(h.Sum(nil)[:16])
	return splits, fp, nil
}

// indexRetried indexes file f, retrying transient errors.
func (s *fileSource) indexRetried(ctx context.Context, f int, opts Options) (fileIndex, error) {
	var x fileIndex
	err := supervisor.Retry(ctx, opts.Retry, func(int) (err error) {
		defer func() {
			if r := recover(); r != nil { // user code (Options.Open, a reader)
				err = fmt.Errorf("actors: panic while indexing: %v", r)
			}
		}()
		x, err = s.index(ctx, f, opts.ReadTimeout)
		return err
	})
	return x, err
}

// index opens file f and finds its splits, each call under the watchdog;
// parent ending stops it.
func (s *fileSource) index(parent context.Context, f int, timeout time.Duration) (fileIndex, error) {
	var w watchdog
	defer w.close()
	ctx := w.open(parent, timeout)
	var r readers.Reader
	err := w.guard(parent, func() (err error) {
		r, err = s.open(ctx, s.entries[f])
		return err
	})
	if err != nil {
		if r != nil {
			r.Close()
		}
		return fileIndex{}, fmt.Errorf("cannot open: %w", s.stalledOr(f, err, timeout))
	}
	defer r.Close()
	if s.positional {
		// Under the watchdog: a stream file's is its index, which reads
		// the whole file.
		if err := w.guard(parent, func() error { return addressable(r, s.Name(f)) }); err != nil {
			return fileIndex{}, s.stalledOr(f, err, timeout)
		}
	}
	x := fileIndex{size: -1}
	if sz, ok := r.(interface{ Size() int64 }); ok {
		x.size = sz.Size()
	}
	if rb, ok := r.(interface{ RecordBytes() int }); ok {
		x.recordBytes = int64(rb.RecordBytes())
	}
	if v, ok := r.(versioned); ok {
		x.version = v.Version()
	}
	if m, ok := r.(dated); ok {
		x.modified = m.Modified()
	}
	if st, ok := statEntry(s.entries[f]); ok && x.modified.IsZero() {
		x.modified = st.ModTime()
	}
	if ix, ok := r.(indexed); ok {
		var rx *recordio.Index
		err := w.guard(parent, func() (err error) { rx, err = ix.Index(); return err })
		if err != nil {
			return fileIndex{}, s.stalledOr(f, err, timeout)
		}
		return s.keepIndex(f, rx, x)
	}
	if c, ok := r.(counted); ok {
		var n uint64
		err := w.guard(parent, func() (err error) { n, err = c.Count(); return err })
		if tail, ok := errors.AsType[*readers.DamagedTail](err); ok {
			// The records before damage to the file's framing are its
			// records; splitsOf decides what the damage means.
			s.setTail(f, tail.Err)
			return s.splitRecords(f, x, tail.Samples), nil
		}
		if err == nil {
			return s.splitRecords(f, x, n), nil
		}
		if !errors.Is(err, readers.ErrUncounted) {
			return fileIndex{}, s.stalledOr(f, fmt.Errorf("counting records: %w", err), timeout)
		}
	}
	for {
		w.arm()
		_, err := r.Next(ctx)
		w.disarm()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if w.tripped(parent) {
				err = ErrReadStalled
			}
			return fileIndex{}, s.stalledOr(f, fmt.Errorf("counting records: %w", err), timeout)
		}
		x.records++
	}
	return s.splitRecords(f, x, x.records), nil
}

// addressable refuses a reader whose records cannot be read by position,
// saying why and what to do.
func addressable(r readers.Reader, name string) error {
	p, ok := r.(readers.Positional)
	if !ok {
		return &readers.NotPositionalError{File: name, Why: "is of a format that is not read by position",
			Fix: "write it as IDX, TFRecord or WebDataset files"}
	}
	return p.Addressable()
}

// versioned is a reader of an object, which says which version it reads.
type versioned interface {
	Version() string
}

// dated is a reader of an object, which says when the version it reads
// was written; a file's time is the file system's.
type dated interface {
	Modified() time.Time
}

// counted is a reader that knows how many records it holds without
// reading them (readers' IDX files, by their checked headers; stream
// files, by theirs), unless it says readers.ErrUncounted.
type counted interface {
	Count() (uint64, error)
}

// splitRecords gives file f's index x its n records in splits of
// DefaultSplitRecords; read by position (a global order), in one split,
// which a billion records would otherwise make a million of.
func (s *fileSource) splitRecords(f int, x fileIndex, n uint64) fileIndex {
	x.records = n
	size := uint64(DefaultSplitRecords)
	if s.positional {
		size = max(n, 1)
	}
	for at := uint64(0); at < n; at += size {
		x.splits = append(x.splits, order.Split{File: f, First: at, Count: min(size, n-at)})
	}
	return x
}

// keepIndex makes file f's splits from its chunk index, and keeps the
// index for the readers' seeks. Its damage (a file cut short included) is
// left out of the splits; splitsOf decides what it means.
func (s *fileSource) keepIndex(f int, rx *recordio.Index, x fileIndex) (fileIndex, error) {
	s.mu.Lock()
	s.indexes[f] = rx
	s.mu.Unlock()
	for _, c := range rx.Chunks {
		if c.NumRecords > 0 {
			x.splits = append(x.splits, order.Split{File: f, First: uint64(c.FirstRecord), Count: uint64(c.NumRecords)})
		}
	}
	x.records = uint64(rx.NumRecords)
	return x, nil
}

// damage is file f's damage, which its chunk index found, or damage to a
// stream file's framing found as it was indexed: the error a reader fails
// with, or under SkipCorrupt nothing, the damage listed in log. Damaged
// chunks have no records in the order: their count cannot be trusted, or
// the file ends in them; nor have the records past damaged framing.
func (s *fileSource) damage(f int, policy supervisor.CorruptPolicy, log *corruptLog) error {
	s.mu.Lock()
	x, tail := s.indexes[f], s.tails[f]
	s.mu.Unlock()
	if tail != nil {
		if policy != supervisor.SkipCorrupt {
			return tail
		}
		log.note(CorruptChunk{File: s.names[f], Offset: offsetOf(tail), Records: -1, Err: tail})
	}
	if x == nil || x.Damaged == 0 {
		return nil
	}
	if policy != supervisor.SkipCorrupt {
		return x.Err()
	}
	log.noteIndex(s.names[f], x)
	return nil
}

// setTail records damage to file f's framing found as it was indexed:
// the file ends there.
func (s *fileSource) setTail(f int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tails == nil {
		s.tails = map[int]error{}
	}
	s.tails[f] = err
}

// stalledOr turns a call the watchdog abandoned into a stalled read (a
// transient error); other errors stay as they are.
func (s *fileSource) stalledOr(f int, err error, timeout time.Duration) error {
	if errors.Is(err, ErrReadStalled) {
		return &stalled{file: s.names[f], after: timeout}
	}
	return err
}
