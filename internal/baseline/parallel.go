package baseline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// ParallelOptions configures Parallel.
type ParallelOptions struct {
	StackedOptions
	// Lanes is how many lanes share the work (default 1): each reads its
	// units, shuffles and batches them on goroutines of its own.
	Lanes int
	// Devices is how many consumers step batches (default 1), each on a
	// goroutine of its own: batch k of the merged stream goes to device
	// k mod Devices.
	Devices int
}

// unit is a run of one file's records that one lane reads sequentially: a
// RecordIO chunk.
type unit struct {
	file         int
	first, count int
}

// laneBatch is a batch and the lane whose storage it is.
type laneBatch struct {
	lane  int
	slots tensor.Slots
}

// Parallel is Stacked spread over o.Lanes lanes, the hand-written
// counterpart of a pipeline whose per-sample work (read, decode, shuffle,
// batch) uses every core. The files' chunks are dealt to the lanes in
// turn (chunk u to lane u mod Lanes); each lane has a reader, a shuffle
// and a batch goroutine, as Stacked, with its own free lists. A merger
// takes the lanes' batches in turn (batch j of lane l is batch j*Lanes+l
// of the stream while every lane has batches), so the stream's order is a
// function of the files, the seed and Lanes, and hands them to the
// devices. Each lane prefetches 2 batches, and each device queues 2.
//
// step is called from Devices goroutines at once, with the device's index.
// Each lane's last batch may be short, so the stream has up to Lanes short
// batches where Stacked has one.
func Parallel(ctx context.Context, paths []string, o ParallelOptions, step func(device int, b tensor.Slots)) (int, error) {
	lanes, devices := max(o.Lanes, 1), max(o.Devices, 1)
	units, indexes, err := chunksOf(paths)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3*lanes)
	outs := make([]chan tensor.Slots, lanes)
	spent := make([]chan tensor.Slots, lanes)
	var wg sync.WaitGroup
	for l := range lanes {
		outs[l], spent[l] = make(chan tensor.Slots, 2), make(chan tensor.Slots, 8)
		var mine []unit
		for u := l; u < len(units); u += lanes {
			mine = append(mine, units[u])
		}
		lo := o.StackedOptions
		lo.Seed = o.Seed + uint64(l)
		wg.Go(func() {
			if err := runLane(ctx, files{paths, indexes}, mine, lo, outs[l], spent[l]); err != nil {
				errc <- err
				cancel() // the other lanes and the merger stop
			}
		})
	}
	queues := make([]chan laneBatch, devices)
	counts := make([]int, devices)
	for d := range devices {
		queues[d] = make(chan laneBatch, 2)
		wg.Go(func() {
			for b := range queues[d] {
				step(d, b.slots)
				k, _ := b.slots.Instances()
				counts[d] += k
				if o.Recycle {
					select {
					case spent[b.lane] <- b.slots:
					default:
					}
				}
			}
		})
	}
	merge(ctx, outs, queues)
	wg.Wait()
	n := 0
	for _, c := range counts {
		n += c
	}
	select {
	case err := <-errc:
		return n, err
	default:
		return n, ctx.Err()
	}
}

// merge takes the lanes' batches in turn, skipping lanes that ended, and
// deals them to the devices' queues in turn; it closes the queues.
func merge(ctx context.Context, outs []chan tensor.Slots, queues []chan laneBatch) {
	defer func() {
		for _, q := range queues {
			close(q)
		}
	}()
	open := make([]int, len(outs)) // the lanes that have not ended
	for l := range open {
		open[l] = l
	}
	k := 0
	for len(open) > 0 {
		for i := 0; i < len(open); {
			b, ok := <-outs[open[i]]
			if !ok {
				open = slices.Delete(open, i, i+1)
				continue
			}
			if !send(ctx, queues[k%len(queues)], laneBatch{lane: open[i], slots: b}) {
				return
			}
			k++
			i++
		}
	}
}

// files are the RecordIO files of a run and their chunk indexes.
type files struct {
	paths   []string
	indexes []*recordio.Index
}

// runLane is one lane: a reader of its units, a shuffle and a batch
// goroutine, as Stacked's, writing batches to out. Its first error ends
// it; the caller cancels ctx so that the other lanes end too.
func runLane(ctx context.Context, fs files, units []unit, o StackedOptions, out chan<- tensor.Slots, spent chan tensor.Slots) error {
	defer close(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	blocks := make(chan *block, 2)
	free := make(chan []byte, 8)
	shuffled := make(chan []row, 2)
	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(blocks)
		readErr = readUnits(ctx, fs, units, o, blocks, free)
	})
	wg.Go(func() { shuffleRows(ctx, o, blocks, shuffled) })
	batchErr := batchRows(ctx, o.Batch, shuffled, free, spent, out)
	cancel() // the shuffle and the reader may be blocked on a send
	wg.Wait()
	return cmp.Or(batchErr, readErr)
}

// chunksOf lists the chunks of the RecordIO files at paths, in list
// order, and returns the files' chunk indexes.
func chunksOf(paths []string) ([]unit, []*recordio.Index, error) {
	var units []unit
	indexes := make([]*recordio.Index, len(paths))
	for f, path := range paths {
		r, err := readers.OpenRecordFile(path)
		if err != nil {
			return nil, nil, err
		}
		x, err := r.Index()
		r.Close()
		if err == nil {
			err = x.Err() // the baseline fails on damage
		}
		if err != nil {
			return nil, nil, err
		}
		indexes[f] = x
		for _, c := range x.Chunks {
			if c.NumRecords > 0 {
				units = append(units, unit{file: f, first: int(c.FirstRecord), count: int(c.NumRecords)})
			}
		}
	}
	return units, indexes, nil
}

// readUnits reads units in order into blocks of o.Group records, keeping a
// file open from one of its units to the next.
func readUnits(ctx context.Context, fs files, units []unit, o StackedOptions, out chan<- *block, free <-chan []byte) error {
	s := newStacker(ctx, o, out, free)
	var r *readers.RecordFile
	open := -1
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	for _, u := range units {
		if u.file != open {
			if r != nil {
				r.Close()
			}
			var err error
			if r, err = readers.OpenRecordFile(fs.paths[u.file]); err != nil {
				r = nil
				return err
			}
			open = u.file
		}
		if err := r.SeekIndexed(fs.indexes[u.file], u.first); err != nil {
			return err
		}
		for range u.count {
			if err := s.next(r); errors.Is(err, io.EOF) {
				return fmt.Errorf("baseline: %s ended inside its chunk at record %d", fs.paths[u.file], u.first)
			} else if err != nil {
				return err
			}
		}
	}
	return s.flush(s.st.TakeBlock())
}
