package scenario

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/readers/wds"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/internal/faultfile"
	"github.com/actorfeed/actorfeed/sim/internal/records"
)

// dataset writes the scenario's files into dir, applies the on-disk faults
// (flipped chunks, truncation) and returns the paths and, per file, the
// records the damage makes unreadable: those of flipped chunks, which a
// skipping reader counts as skipped, and those of the chunk a truncation
// cuts, the file's damaged tail, which have no place in its index.
func dataset(dir string, sc Scenario) (paths []string, damaged, cut []map[int]bool, err error) {
	sh := sc.Shape
	damaged = make([]map[int]bool, sh.Files)
	cut = make([]map[int]bool, sh.Files)
	for f := range sh.Files {
		path := filepath.Join(dir, fmt.Sprintf("part-%d%s", f, records.Suffix(sh.Format)))
		if err := records.WriteAs(sh.Format, path, f, sh.Records, sh.ChunkBytes, sh.Ragged); err != nil {
			return nil, nil, nil, err
		}
		paths = append(paths, path)
		damaged[f] = map[int]bool{}
	}
	// Flips first (they find chunks through the index, which truncation
	// breaks), each chunk at most once (a second flip of the same byte
	// would repair it).
	for _, fl := range sc.Faults {
		if fl.Kind != sim.FlipChunk {
			continue
		}
		flip := flipChunk
		if sh.Format != "" {
			flip = func(path string, k int, damaged map[int]bool) ([]int, error) {
				return flipRecord(sh.Format, path, k*sh.Records/8, damaged)
			}
		}
		recs, err := flip(paths[fl.File], fl.Chunk, damaged[fl.File])
		if err != nil {
			return nil, nil, nil, err
		}
		for _, r := range recs {
			damaged[fl.File][r] = true
		}
	}
	for _, fl := range sc.Faults {
		if fl.Kind == sim.Truncate && cut[fl.File] == nil {
			recs, err := truncateLastChunk(paths[fl.File])
			if err != nil {
				return nil, nil, nil, err
			}
			cut[fl.File] = map[int]bool{}
			for _, r := range recs {
				delete(damaged[fl.File], r)
				cut[fl.File][r] = true
			}
		}
	}
	return paths, damaged, cut, nil
}

func index(path string) (*recordio.Index, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	// Damage (a truncation done) is left out of the chunks, as the
	// pipeline's index leaves it out.
	return recordio.LoadIndex(fh, st.Size(), path)
}

// flipChunk flips a byte in the payload of chunk k (mod the chunk count)
// and returns the records that chunk holds; a chunk whose records are
// already damaged is left alone.
func flipChunk(path string, k int, damaged map[int]bool) ([]int, error) {
	x, err := index(path)
	if err != nil {
		return nil, err
	}
	c := x.Chunks[k%len(x.Chunks)]
	if damaged[c.FirstRecord] {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	data[c.Offset+recordio.HeaderSize+int64(c.StoredSize)/2] ^= 0x5a
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, err
	}
	recs := make([]int, c.NumRecords)
	for i := range recs {
		recs[i] = c.FirstRecord + i
	}
	return recs, nil
}

// flipRecord damages record r of a stream file of format and returns it;
// a record already damaged is left alone. A TFRecord record's data then
// fails its checksum; a shard's first member, the id, is no integer.
func flipRecord(format, path string, r int, damaged map[int]bool) ([]int, error) {
	if damaged[r] {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var offsets []int64
	skip := int64(12) // a record's header: its data follows
	if format == records.TFRecord {
		offsets, err = tfrecord.NewReader(bytes.NewReader(data), path).Offsets()
	} else {
		offsets, err = wds.NewReader(bytes.NewReader(data), path).Offsets()
		skip = 512 // a ustar header: the id's digits follow
	}
	if err != nil {
		return nil, err
	}
	data[offsets[r]+skip] ^= 0x5a
	return []int{r}, os.WriteFile(path, data, 0o644)
}

// truncateLastChunk cuts the file in the middle of its last chunk's
// payload and returns the records that chunk held.
func truncateLastChunk(path string) ([]int, error) {
	x, err := index(path)
	if err != nil {
		return nil, err
	}
	c := x.Chunks[len(x.Chunks)-1]
	recs := make([]int, c.NumRecords)
	for i := range recs {
		recs[i] = c.FirstRecord + i
	}
	return recs, os.Truncate(path, c.Offset+recordio.HeaderSize+int64(c.StoredSize)/2)
}

// disk injects the read faults of a scenario into the files' reads. Faults
// fire by count per file (the Nth read of that file, across reopenings) or
// by a per-file generator seeded from the scenario, so a schedule does not
// depend on how the readers' goroutines interleave.
type disk struct {
	paths  []string
	faults []Fault

	mu    sync.Mutex
	reads []int
	rngs  []*rand.Rand
	fired map[int]bool // fault index -> fired (faults that fire once)
	count map[sim.FaultKind]int
}

// entries are the entries that read the scenario's files (records.Entry).
func entries(sh Shape, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = records.Entry(sh.Format, p, sh.Ragged)
	}
	return out
}

// newDisk reads the files the entries name through faults.
func newDisk(paths []string, faults []Fault, seed uint64) *disk {
	d := &disk{paths: paths, faults: faults, reads: make([]int, len(paths)), fired: map[int]bool{}, count: map[sim.FaultKind]int{}}
	for f := range paths {
		d.rngs = append(d.rngs, rand.New(rand.NewPCG(seed, uint64(f)+1)))
	}
	return d
}

// open is actors.Options.Open for the scenario's files, entries as
// records.Entry names them.
func (d *disk) open(ctx context.Context, entry string) (readers.Reader, error) {
	file := slices.Index(d.paths, entry)
	if file < 0 {
		return nil, fmt.Errorf("sim: unknown file %s", entry)
	}
	name, path, err := readers.ParseEntry(entry)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(name, records.Megatron+"("):
		// The .idx and the .bin both read through file's faults.
		return readers.OpenTokens(entry, func(path string) (readers.Source, error) { return d.source(ctx, file, path) })
	case name != "recordio":
		return readers.OpenStream(entry, func() (readers.Source, error) { return d.source(ctx, file, path) })
	}
	src, err := d.source(ctx, file, path)
	if err != nil {
		return nil, err
	}
	return readers.NewRecordFile(src, src.Size(), path, src), nil
}

// source opens path, read as file of the scenario through its faults
// until ctx ends.
func (d *disk) source(ctx context.Context, file int, path string) (faultfile.Source, error) {
	fh, err := os.Open(path)
	if err != nil {
		return faultfile.Source{}, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return faultfile.Source{}, err
	}
	return faultfile.New(&faultyFile{d: d, file: file, f: fh, ctx: ctx}, st.Size(), fh), nil
}

// fire counts a fault that fired; mu is held.
func (d *disk) fire(i int) {
	d.fired[i] = true
	d.count[d.faults[i].Kind]++
}

// faultyFile is one opened file, read through the scenario's faults.
type faultyFile struct {
	d    *disk
	file int
	f    *os.File
	ctx  context.Context // the reader's: a stalled read waits for it
}

func (ff *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	d := ff.d
	d.mu.Lock()
	d.reads[ff.file]++
	n := d.reads[ff.file]
	var delay time.Duration
	var fail, short, stall bool
	for i, f := range d.faults {
		if f.File != ff.file {
			continue
		}
		switch f.Kind {
		case sim.ReadError:
			if n == f.N && !d.fired[i] {
				d.fire(i)
				fail = true
			}
		case sim.ReadErrorP:
			if d.rngs[ff.file].Float64() < f.P {
				d.count[f.Kind]++
				fail = true
			}
		case sim.Latency:
			delay += f.Delay
		case sim.ShortRead:
			if n == f.N && !d.fired[i] && len(p) > 1 {
				d.fire(i)
				short = true
			}
		case sim.StallRead:
			if n == f.N && !d.fired[i] {
				d.fire(i)
				stall = true
			}
		}
	}
	d.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	switch {
	case stall:
		<-ff.ctx.Done()
		return 0, ff.ctx.Err()
	case fail:
		return 0, &os.PathError{Op: "read", Path: ff.f.Name(), Err: syscall.EIO}
	case short:
		k, _ := ff.f.ReadAt(p[:len(p)/2], off)
		return k, &os.PathError{Op: "read", Path: ff.f.Name(), Err: syscall.EAGAIN}
	}
	return ff.f.ReadAt(p, off)
}

// counts returns how often each file-system fault fired.
func (d *disk) counts() map[sim.FaultKind]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.count)
}
