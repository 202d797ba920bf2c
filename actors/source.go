package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// fileSource opens the files of a Files stage; it seeks to a record by the
// reader's Seek when it has one, by reading otherwise. A RecordIO file's
// chunk index is read once and kept, so reopening the file at a record
// after a transient error reads no chunk header again.
type fileSource struct {
	entries []string
	names   []string
	open    func(ctx context.Context, entry string) (readers.Reader, error)

	mu      sync.Mutex
	indexes map[int]*recordio.Index
	// tails are the damage to files' framing found as they were indexed
	// (readers.DamagedTail): each such file's records end there.
	tails map[int]error
	// versions are the objects' versions (ETags) the order was built on:
	// a reader opened later on another version (the object was replaced)
	// is refused, never read into the same order.
	versions map[int]string
	// modified is when each file was written, as indexed (file_index.go).
	modified []time.Time
	// positional says the files are read by position (a global order):
	// indexing refuses a file that cannot be (readers.Positional).
	positional bool
	// recordBytes is the largest record's bytes, as the files were indexed:
	// what a reader says, or a file's bytes a record (splitsOf).
	recordBytes int64
	// epochOf is the order's seed and the epoch that a pass reads, told
	// to the readers whose records depend on them (epochal); nil without
	// an order.
	epochOf func(pass uint32) (seed, epoch uint64)
}

// indexed is a reader that can seek with a kept chunk index.
type indexed interface {
	Index() (*recordio.Index, error)
	SeekIndexed(x *recordio.Index, rec int) error
}

func newFileSource(entries []string, open func(context.Context, string) (readers.Reader, error)) (*fileSource, error) {
	if len(entries) > messages.MaxFiles {
		return nil, fmt.Errorf("%w: %d files, at most %d", ErrBadSpec, len(entries), messages.MaxFiles)
	}
	s := &fileSource{entries: entries, names: make([]string, len(entries)), open: open,
		modified: make([]time.Time, len(entries)), indexes: map[int]*recordio.Index{}, versions: map[int]string{}}
	for i, e := range entries {
		_, path, err := readers.ParseEntry(e)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
		}
		s.names[i] = path
	}
	return s, nil
}

func (s *fileSource) Rewindable() bool     { return true }
func (s *fileSource) Name(file int) string { return s.names[file] }

// sampleKey is the key of a sample of a WebDataset shard, read from its
// header, for an error to name it by; "" for another format, or when it
// cannot be read (within keyTimeout to open).
func (s *fileSource) sampleKey(file, record int) string {
	if f, _, err := readers.ParseEntry(s.entries[file]); err != nil || f != "wds" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), keyTimeout)
	defer cancel()
	r, err := s.open(ctx, s.entries[file])
	if err != nil {
		return ""
	}
	defer r.Close()
	k, ok := r.(interface{ SampleKey(int) (string, error) })
	if !ok {
		return ""
	}
	key, err := k.SampleKey(record)
	if err != nil {
		return ""
	}
	return key
}

// keyTimeout bounds opening a file to name a sample in an error.
const keyTimeout = 5 * time.Second

// pin records that file is read at version.
func (s *fileSource) pin(file int, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions[file] = version
}

// epochal is a reader whose records depend on the epoch it reads: a token
// corpus packs its documents in each epoch's order.
type epochal interface {
	SetEpoch(seed, epoch uint64)
}

// setEpoch tells r, when its records depend on it, the order's seed and
// the epoch it reads.
func setEpoch(r readers.Reader, seed, epoch uint64) {
	if e, ok := r.(epochal); ok {
		e.SetEpoch(seed, epoch)
	}
}

// sameVersion refuses r when it reads another version of file's object
// than the order was built on.
func (s *fileSource) sameVersion(file int, r readers.Reader) error {
	s.mu.Lock()
	want, pinned := s.versions[file]
	s.mu.Unlock()
	v, ok := r.(versioned)
	if !pinned || !ok || v.Version() == want {
		return nil
	}
	return fmt.Errorf("%s: %w (ETag %s, now %s)", s.names[file], objstore.ErrReplaced, want, v.Version())
}

func (s *fileSource) Open(ctx context.Context, file int, pass uint32, from uint64) (readers.Reader, error) {
	r, err := s.open(ctx, s.entries[file])
	if err != nil {
		return nil, err
	}
	if err := s.sameVersion(file, r); err != nil {
		r.Close()
		return nil, err
	}
	if s.epochOf != nil {
		seed, epoch := s.epochOf(pass)
		setEpoch(r, seed, epoch)
	}
	if from == 0 {
		return r, nil
	}
	if ix, ok := r.(indexed); ok {
		if err := s.seek(file, ix, int(from)); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
	if sk, ok := r.(interface{ Seek(int) error }); ok {
		if err := sk.Seek(int(from)); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
	for k := uint64(0); k < from; k++ {
		if _, err := r.Next(ctx); err != nil {
			r.Close()
			return nil, fmt.Errorf("actors: skipping to record %d of %s: %w", from, s.names[file], err)
		}
	}
	return r, nil
}

// seek moves r to record rec of file, reading the file's index the first
// time only.
func (s *fileSource) seek(file int, r indexed, rec int) error {
	s.mu.Lock()
	x := s.indexes[file]
	s.mu.Unlock()
	if x == nil {
		var err error
		if x, err = r.Index(); err != nil {
			return err
		}
		s.mu.Lock()
		s.indexes[file] = x
		s.mu.Unlock()
	}
	return r.SeekIndexed(x, rec)
}

// chunkAt is the records [first, end) of the chunk that holds record rec
// of file, when the file's chunk index is kept: where a reader goes on
// when it skips a corrupt chunk it could not even seek into.
func (s *fileSource) chunkAt(file int, rec uint64) (first, end uint64, ok bool) {
	s.mu.Lock()
	x := s.indexes[file]
	s.mu.Unlock()
	if x == nil {
		return 0, 0, false
	}
	c, _, ok := x.Locate(int(rec))
	if !ok {
		return 0, 0, false
	}
	return uint64(c.FirstRecord), uint64(c.FirstRecord) + uint64(c.NumRecords), true
}

// queueSource reads a feed queue: one "file" that continues across opens.
// Its readers pop and nothing more: a restarted file reader must not close
// the queue. The pipeline closes it when it shuts down.
type queueSource struct{ q *readers.FeedQueue }

func (s queueSource) Rewindable() bool { return false }
func (s queueSource) Name(int) string  { return "feed queue" }
func (s queueSource) Open(context.Context, int, uint32, uint64) (readers.Reader, error) {
	return queuePopper(s), nil
}

type queuePopper struct{ q *readers.FeedQueue }

func (r queuePopper) Next(ctx context.Context) (tensor.Slots, error) { return r.q.Pop(ctx) }
func (r queuePopper) Reset() error                                   { return readers.ErrResetUnsupported }
func (r queuePopper) Close() error                                   { return nil }
