package sim

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/actorfeed/actorfeed/internal/pause"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/sim/internal/faultfile"
)

// openFile opens the RecordIO file at path through the schedule's file
// faults; a truncation makes it look shorter (the file is never changed),
// by at most all but its first byte: a file cut to nothing cannot be told
// from an empty one.
func (in *Injector) openFile(ctx context.Context, path string) (readers.Reader, error) {
	src, err := in.source(ctx, "recordio", path)
	if err != nil {
		return nil, err
	}
	return readers.NewRecordFile(src, src.Size(), path, src), nil
}

// openStream opens entry, a WebDataset shard or TFRecord file at path, as
// openFile does a RecordIO file: a truncated stream cannot be indexed, so
// it fails as damaged where RecordIO's tail is left out.
func (in *Injector) openStream(ctx context.Context, entry, formatName, path string) (readers.Reader, error) {
	return readers.OpenStream(entry, func() (readers.Source, error) { return in.source(ctx, formatName, path) })
}

// source opens the file at path through the schedule's file faults.
func (in *Injector) source(ctx context.Context, formatName, path string) (faultfile.Source, error) {
	fh, size, err := format.OpenFile(formatName, path)
	if err != nil {
		return faultfile.Source{}, err
	}
	in.mu.Lock()
	for i, f := range in.faults {
		if f.Kind == Truncate && f.matchesFile(path) {
			size = max(min(size, 1), size-f.Bytes)
			if !in.cut[path] {
				in.cut[path] = true
				in.fire(i)
			}
		}
	}
	in.mu.Unlock()
	return faultfile.New(&injectedFile{in: in, path: path, f: fh, ctx: ctx, size: size}, size, fh), nil
}

// injectedFile is one opened file, read through the schedule.
type injectedFile struct {
	in   *Injector
	path string
	f    *os.File
	ctx  context.Context // the reader's: stalls and latencies end with it
	size int64           // as truncations leave it
}

// readAction is what the schedule does to one read.
type readAction struct {
	delay        time.Duration
	stallUntil   time.Duration // since the start; 0: none
	stallForever bool          // until the read is abandoned
	fail, short  bool
	flip         int // flip the byte at flip % n; -1: none
}

// onRead decides what happens to a read of path.
func (in *Injector) onRead(path string) readAction {
	now := in.now()
	act := readAction{flip: -1}
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, f := range in.faults {
		if !fileFault(f.Kind) || f.Kind == Truncate || !f.matchesFile(path) || !in.active(i, now) {
			continue
		}
		if f.Kind == StallRead && f.At == 0 {
			if end, on := in.stallAt(i, now); on {
				act.stallUntil = max(act.stallUntil, end)
				in.delay += end - now
			}
			continue
		}
		n, r := in.next(target{fault: i, name: path}, filepath.Base(path))
		if f.Kind == Latency {
			if f.P == 0 || r.Float64() < f.P {
				d := f.Dist.Draw(r)
				act.delay += d
				in.delay += d
				in.fire(i)
			}
			continue
		}
		if !f.chosen(n, r) {
			continue
		}
		in.fire(i)
		switch f.Kind {
		case ReadError:
			act.fail = true
		case ShortRead:
			act.short = true
		case FlipBytes:
			act.flip = r.IntN(1 << 30)
		case StallRead:
			if f.Length == 0 {
				act.stallForever = true
			} else {
				act.stallUntil = max(act.stallUntil, now+f.Length)
				in.delay += f.Length
			}
		}
	}
	return act
}

func (ff *injectedFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= ff.size {
		return 0, io.EOF
	}
	var tail error
	if off+int64(len(p)) > ff.size {
		p, tail = p[:ff.size-off], io.EOF
	}
	in := ff.in
	act := in.onRead(ff.path)
	if err := pause.Sleep(ff.ctx, act.delay); err != nil {
		return 0, err
	}
	switch {
	case act.stallForever:
		<-ff.ctx.Done()
		return 0, ff.ctx.Err()
	case act.stallUntil > 0:
		if err := pause.Sleep(ff.ctx, time.Until(in.start.Add(act.stallUntil))); err != nil {
			return 0, err
		}
	}
	switch {
	case act.fail:
		return 0, &os.PathError{Op: "read", Path: ff.path, Err: syscall.EIO}
	case act.short && len(p) > 1:
		k, _ := ff.f.ReadAt(p[:len(p)/2], off)
		return k, &os.PathError{Op: "read", Path: ff.path, Err: syscall.EAGAIN}
	}
	n, err := ff.f.ReadAt(p, off)
	if act.flip >= 0 && n > 0 {
		p[act.flip%n] ^= 0x5a
	}
	if err == nil {
		err = tail
	}
	return n, err
}
