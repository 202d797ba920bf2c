// Package actors is the actor runtime: every file reader, decorator and
// device consumer of a pipeline is a protoactor-go actor, supervised by the
// pipeline's own supervisor actor, exchanging batch messages under explicit
// credit (docs/protocol.md). Restarts, re-init (Reset) and multi-pass
// control are mailbox protocols, and a restarted stage loses and duplicates
// nothing: its state lives in a cell that outlives the actor instance.
// The stages whose work is protocol alone (open_files, the decorators, the
// merge, the deal and double buffer) are pure state machines, package
// internal/protocol's, that one generic actor runs (machine.go); xmap's
// protocol and the data service's client are too, each run by an actor
// that adds what needs a runtime (workers, ticks, probes). The link
// between two stages is a pair of them (protocol.Outlet and Inlet), which
// the readers, devices and the data service's client use as well.
//
// New builds a pipeline read with Next (PaddlePaddle Fluid's read op and
// ReaderHolder); NewDevices builds one that feeds device actors. Files is
// open_files (and create_recordio_file_reader), Queue is
// create_py_array_reader, and Shuffle, Batch, Map, XMap (xmap_readers, on
// a pool of worker goroutines the stage owns), MultiPass and DoubleBuffer
// are the decorated readers.
//
// Files delivers its records in the order (docs/determinism.md): a function
// of the files, the seed and the epoch, whatever the readers' number and
// timing. Options.Shard makes a pipeline one rank's share of each epoch;
// Pipeline.State is where it stands, in a few hundred bytes, and
// Options.Resume continues from it exactly, after a preemption, on other
// numbers of readers or devices; given the states of every rank of a
// stopped job, on another number of ranks, whatever step each rank
// stopped at (Rejoin). Devices.Steps stops a trainer at a step. A Shuffle
// with Global makes the order a uniform permutation of every record each
// epoch, whose records the file readers read by position (gather.go).
//
// Options.Lanes copies the batch and map stages over the cores, between a
// deal and a merge stage (lanes.go). Options.Service runs the stages before
// the double buffer on data service workers (service.go, service_client.go
// and internal/protocol's ServiceMachine; the worker, the other end, and
// the nodes that carry both over Proto.Actor remote are package service's).
// Options.OnCorrupt skips corrupt records and chunks, counted in Stats
// (corrupt.go), and the samples a map cannot read (bad_samples.go). The
// Max* limits (limits.go) bound the sizes a spec or a state may ask for.
package actors

// actors may import tensor, readers (and readers/order and
// readers/recordio), messages, supervisor, internal/protocol and
// protoactor-go (with orcaman/concurrent-map, the type of protoactor's
// process registry, which NewSystem replaces with a small one). It must
// not import sim or cmd.
