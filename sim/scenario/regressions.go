package scenario

import (
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/internal/records"
)

// Regressions are named scenarios kept because they found a bug, or
// because they pin down a fault the random mix reaches rarely. Every one
// must pass.
func Regressions() []Scenario {
	base := Shape{Files: 3, Records: 80, ChunkBytes: 500, Threads: 2, Group: 8, Shuffle: 50,
		Batch: 10, Devices: 2, Passes: 2}
	with := func(f func(*Shape)) Shape { s := base; f(&s); return s }
	return append([]Scenario{
		{Name: "clean", Seed: 1, Shape: base},
		{Name: "stalled-read", Seed: 2, Shape: base, Faults: []Fault{{Kind: sim.StallRead, File: 1, N: 5}}},
		{Name: "stalled-read-every-open", Seed: 3, Shape: base, Faults: []Fault{{Kind: sim.StallRead, File: 0, N: 3}, {Kind: sim.StallRead, File: 0, N: 9}}},
		{Name: "flip-chunk-skip", Seed: 4, Shape: with(func(s *Shape) { s.Skip = true }), Faults: []Fault{{Kind: sim.FlipChunk, File: 2, Chunk: 1}}},
		{Name: "flip-chunk-fail", Seed: 5, Shape: base, Faults: []Fault{{Kind: sim.FlipChunk, File: 0, Chunk: 0}}},
		{Name: "truncated", Seed: 6, Shape: with(func(s *Shape) { s.Skip = true }), Faults: []Fault{{Kind: sim.Truncate, File: 1}}},
		{Name: "short-read", Seed: 7, Shape: base, Faults: []Fault{{Kind: sim.ShortRead, File: 2, N: 4}}},
		{Name: "panic-storm", Seed: 8, Shape: base, Faults: []Fault{{Kind: sim.PanicStorm, Stage: actors.KindBatch, N: 2, Count: stormLength}}},
		{Name: "device-panic-and-stall", Seed: 9, Shape: base, Faults: []Fault{{Kind: sim.PanicDevice, Device: 1, N: 3},
			{Kind: sim.StallDevice, Device: 0, N: 2, Delay: 20 * time.Millisecond}}},
		{Name: "drop-last-multipass", Seed: 10, Shape: with(func(s *Shape) { s.DropLast, s.MultiPass, s.Batch = true, 2, 7 }),
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindMultiPass, N: 4}}},
		// The xmap rewind bug (it could acknowledge items not yet re-sent)
		// showed under unordered xmap with a panicking function.
		{Name: "xmap-unordered-restarts", Seed: 11, Shape: with(func(s *Shape) { s.XMap, s.AnyOrder, s.Group = 2, true, 1 }),
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindXMap, N: 7}, {Kind: sim.StagePanic, Stage: actors.KindXMap, N: 19}}},
		// A reader opened at a record it kept failing on used to retry
		// forever; now the attempts count per record.
		{Name: "read-errors-per-record", Seed: 12, Shape: with(func(s *Shape) { s.ChunkBytes = 200 }),
			Faults: []Fault{{Kind: sim.ReadError, File: 0, N: 6}, {Kind: sim.ReadError, File: 0, N: 7}, {Kind: sim.ReadErrorP, File: 1, P: 0.02}}},
		// Simulator bugs found by seeds 154 and 184: a truncation before a
		// flip broke the flip's index, and a chunk flipped twice was
		// repaired. Kept so that both compositions stay covered.
		{Name: "flip-and-truncate", Seed: 154, Shape: with(func(s *Shape) { s.Skip = true }),
			Faults: []Fault{{Kind: sim.Truncate, File: 2}, {Kind: sim.FlipChunk, File: 2, Chunk: 1}}},
		{Name: "same-chunk-flipped-twice", Seed: 184, Shape: base,
			Faults: []Fault{{Kind: sim.FlipChunk, File: 0, Chunk: 1}, {Kind: sim.FlipChunk, File: 0, Chunk: 1}}},
		// Found by the first scenarios over stream formats (seeds 21 and
		// 402 then): a failed read of a shard or TFRecord file was
		// reported as damage, so it failed the pipeline (or was skipped)
		// instead of being retried.
		{Name: "wds-eio-retried", Seed: 13, Shape: with(func(s *Shape) { s.Format, s.Skip, s.Ragged = records.WebDataset, true, true }),
			Faults: []Fault{{Kind: sim.ReadError, File: 0, N: 4}, {Kind: sim.ShortRead, File: 1, N: 3}, {Kind: sim.FlipChunk, File: 2, Chunk: 3}}},
		{Name: "tfrecord-eio-retried", Seed: 14, Shape: with(func(s *Shape) { s.Format, s.Skip = records.TFRecord, true }),
			Faults: []Fault{{Kind: sim.ReadError, File: 0, N: 4}, {Kind: sim.ReadErrorP, File: 1, P: 0.02}, {Kind: sim.FlipChunk, File: 2, Chunk: 3},
				{Kind: sim.StagePanic, Stage: actors.KindFileReader, N: 5}}},
		// Found by seed 1287: open_files restarted with a finished file's
		// End still in its mailbox, marked the file done under the old
		// epoch and never gave its reader the next file; the pass hung.
		{Name: "files-restart-old-end", Seed: 1287, Shape: Shape{Files: 3, Records: 21, ChunkBytes: 4000, Threads: 1,
			Group: 16, Batch: 17, Devices: 3, Passes: 2, Skip: true},
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindFiles, N: 21}, {Kind: sim.StagePanic, Stage: actors.KindFiles, N: 5}}},
		// Found by seeds 100526 and 101525: a device panicked on the
		// message by which Reset starts its next pass; the message was lost
		// with the panic and the pass never started.
		{Name: "device-storm-across-reset", Seed: 100526, Shape: Shape{Files: 2, Records: 13, ChunkBytes: 4000, Threads: 1,
			Group: 8, Batch: 18, Devices: 3, Passes: 3, Skip: true},
			Faults: []Fault{{Kind: sim.PanicStorm, Stage: actors.KindDevice, N: 8, Count: stormLength}}},
		{Name: "recycle-drop-partial", Seed: 13, Shape: with(func(s *Shape) { s.Recycle, s.DropPartial, s.Devices = true, true, 3 }),
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindDoubleBuffer, N: 5}, {Kind: sim.SlowDevice, Device: 2, Delay: 200 * time.Microsecond}}},
		// Found by seed 1001637 (the first run with --parallel): a file
		// reader was stopped (open_files restarted and reassigned its files)
		// while it reopened a file after a stalled read. The reopen failed
		// because of the stop, and the reader reported that as the file's
		// failure.
		{Name: "stopped-while-reopening", Seed: 1001637, Shape: Shape{Files: 2, Records: 69, ChunkBytes: 200, Threads: 4, Group: 2, AnyOrder: true,
			Shuffle: 200, Batch: 4, Devices: 3, Passes: 1},
			Faults: []Fault{{Kind: sim.StallRead, File: 0, N: 9}, {Kind: sim.StallRead, File: 1, N: 18}, {Kind: sim.StallRead, File: 1, N: 7},
				{Kind: sim.StagePanic, Stage: actors.KindFiles, N: 31}}},
		// Records that do not stack (tensor.Stack) go through the shuffle and
		// the batch stage as parts of one record each, across restarts and a
		// damaged chunk.
		{Name: "ragged-restarts", Seed: 15, Shape: with(func(s *Shape) { s.Ragged, s.Skip, s.AnyOrder = true, true, true }),
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindShuffle, N: 4}, {Kind: sim.StagePanic, Stage: actors.KindBatch, N: 6},
				{Kind: sim.FlipChunk, File: 1, Chunk: 2}}},
		// Found by seed 1663, the first run that drew the links' windows:
		// open_files granted its readers credit before sending its
		// subscriber what it asked for, so it saw its buffer full, and no
		// later message prompted it; the shuffle waited for groups it had
		// asked for. As kept here it hung in 5 runs of 6 on the old order.
		{Name: "files-credit-after-flush", Seed: 1663, Shape: Shape{Files: 3, Records: 64, ChunkBytes: 500, Threads: 1, Group: 2, AnyOrder: true,
			Shuffle: 10, Batch: 6, MultiPass: 2, Devices: 1, Passes: 2, Ragged: true, Window: 8, Capacity: 8, ReaderWindow: 3},
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindShuffle, N: 16}, {Kind: sim.StagePanic, Stage: actors.KindMultiPass, N: 36},
				{Kind: sim.SlowDevice, Delay: 106 * time.Microsecond}}},
	}, append(orderRegressions(), queueRegressions()...)...)
}

// queueRegressions are the scenarios of a feed queue that found bugs.
func queueRegressions() []Scenario {
	queue := func(lens []int, kill int) Shape {
		return Shape{Queue: true, QueueLens: lens, QueueKill: kill, QueueCap: 4, Files: 1, Records: 60, Threads: 1, Group: 4,
			Batch: 11, Devices: 2, Passes: len(lens), Recycle: true, ReaderWindow: 3}
	}
	return []Scenario{
		// Seeds 806, 983 and 2525, the first run over queues: a reader
		// restarted, or reassigned by a restarted open_files, while it
		// waited for the rest of a group dropped the records it had
		// popped; a queue cannot give them again (one run in a few
		// hundred of TestQueueSourceUnderPanics).
		{Name: "queue-restart-mid-group", Seed: 2525, Shape: queue([]int{55, 60}, 0),
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindFileReader, N: 20}, {Kind: sim.StagePanic, Stage: actors.KindFiles, N: 31},
				{Kind: sim.PanicDevice, N: 7}}},
		// The double buffer read the third pass ahead from the queue the
		// second's producer had closed: the pass ended empty, and its
		// records went to the pass after or were dropped.
		{Name: "queue-passes-closed-mid-pass", Seed: 3, Shape: queue([]int{40, 0, 17, 60}, 0),
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindBatch, N: 9}}},
		// A producer's error reaches the trainer, and nothing popped
		// before it is handed out twice.
		{Name: "queue-killed-by-producer", Seed: 4, Shape: queue([]int{30, 30}, 12),
			Faults: []Fault{{Kind: sim.StagePanic, Stage: actors.KindFileReader, N: 7}}},
	}
}

// orderRegressions are the scenarios that found bugs of the order
// (docs/determinism.md).
func orderRegressions() []Scenario {
	return []Scenario{
		// Found by seed 293, the first run in the order: a window began
		// inside a corrupt chunk, and its reader could not seek there (the
		// chunk fails its checksum); under the skip policy it must skip
		// the rest of the chunk instead of failing.
		{Name: "order-seek-into-corrupt-chunk", Seed: 293, Shape: Shape{Files: 4, Records: 98, ChunkBytes: 4000, Threads: 4, Group: 4,
			Shuffle: 10, Batch: 8, Devices: 1, Passes: 2, Skip: true},
			Faults: []Fault{{Kind: sim.FlipChunk, File: 3, Chunk: 4}, {Kind: sim.PanicDevice, N: 3}}},
		// Found by seed 1234: open_files granted a reader ahead of the head
		// more groups than its read-ahead slots; once it became the head it
		// waited for a slot that only an acknowledgement, sent with demand
		// it would never get, could give back. The pass hung.
		{Name: "order-ahead-within-slots", Seed: 1234, Shape: Shape{Files: 2, Records: 58, ChunkBytes: 1500, Threads: 2, Group: 8,
			Batch: 12, Devices: 3, DropPartial: true, Passes: 1, Skip: true, Capacity: 8, ReaderWindow: 1},
			Faults: []Fault{{Kind: sim.StallDevice, N: 6, Delay: 22 * time.Millisecond}, {Kind: sim.SlowDevice, Device: 2, Delay: 308 * time.Microsecond}}},
		// Seed 959: in the order, drop_last drops the positions past the
		// last whole batch, damaged ones included, not a count of samples.
		{Name: "order-drop-last-with-holes", Seed: 959, Shape: Shape{Files: 4, Records: 116, ChunkBytes: 1500, Threads: 2, Group: 2,
			Shuffle: 1, Batch: 9, DropLast: true, Devices: 2, Passes: 2, Skip: true, Ragged: true},
			Faults: []Fault{{Kind: sim.FlipChunk, File: 0, Chunk: 6}}},
	}
}

// PreemptRegressions are named preempted jobs (sim --preempt runs them
// with its generated ones): the ways a job resized from ranks that
// stopped at different steps lost or repeated samples before the whole
// job's states were resumed from (docs/determinism.md).
func PreemptRegressions() []Scenario {
	base := Shape{Files: 4, Records: 250, ChunkBytes: 1500, Threads: 2, Group: 8, Shuffle: 64, Batch: 16, Devices: 2, Passes: 2}
	stop := func(at int, lag []int, world int) Stop {
		return Stop{At: at, Lag: lag, World: world, Threads: 2, Devices: 2}
	}
	killed := func(s Stop, ckpt int) Stop { s.Killed, s.Checkpoint = true, ckpt; return s }
	job := func(world int, stops ...Stop) *Preemption { return &Preemption{World: world, Stops: stops} }
	return []Scenario{
		// Rank 0 stopped 8 batches before rank 1, resumed as three: from
		// rank 1's state alone 128 samples were lost, from rank 0's
		// repeated. Then resized 3 -> 1 -> 4 within the same epoch.
		{Name: "resize-ranks-at-different-steps", Seed: 31, Shape: base,
			Preempt: job(2, stop(20, []int{8, 0}, 3), stop(6, []int{0, 2, 4}, 1), stop(5, nil, 4))},
		// Killed ranks resume from checkpoints of different ages.
		{Name: "resize-checkpoints-of-different-ages", Seed: 32, Shape: base,
			Preempt: job(3, killed(stop(12, []int{0, 3, 5}, 2), 9), killed(stop(4, []int{1, 0}, 3), 2))},
		// One rank finished its share of the epoch (it stands at the next
		// one's start) while the other had batches left.
		{Name: "resize-a-rank-finished-its-share", Seed: 33, Shape: base,
			Preempt: job(2, stop(40, []int{0, 12}, 3))},
		// Devices commit out of order: states list batches committed past
		// their positions, at different steps, resized down and up.
		{Name: "resize-items-committed-ahead", Seed: 34, Shape: with(base, func(s *Shape) { s.Devices, s.Skip = 3, true }),
			Faults:  []Fault{{Kind: sim.FlipChunk, File: 1, Chunk: 0}}, // stopped by count, not index
			Preempt: job(4, stop(6, []int{2, 0, 1, 3}, 2), stop(9, []int{0, 4}, 4))},
		// 33 samples on two ranks: rank 1's second batch is padding alone.
		// Rank 1 stopped before it, and the job went on as one rank, with
		// nothing of the epoch left to deliver: the checker took the ranks'
		// unequal counts for a loss (seed 534 did so one run in two).
		{Name: "resize-leaves-only-padding", Seed: 35,
			Shape:   with(base, func(s *Shape) { s.Files, s.Records, s.Batch = 3, 11, 16 }),
			Preempt: job(2, stop(2, []int{0, 1}, 1))},
	}
}

func with(s Shape, f func(*Shape)) Shape { f(&s); return s }
