package sim

// FaultKind names a fault.
type FaultKind string

// The faults a schedule or a scenario (sim/scenario) can inject.
const (
	ReadError   FaultKind = "read-error"   // EIO at the Nth read of a file (once)
	ReadErrorP  FaultKind = "read-error-p" // EIO with probability P per read of a file
	Latency     FaultKind = "latency"      // every read of a file takes Delay more
	ShortRead   FaultKind = "short-read"   // the Nth read of a file returns part of its bytes and EAGAIN
	StallRead   FaultKind = "stall-read"   // the Nth read of a file blocks until the reader's context ends
	FlipChunk   FaultKind = "flip-chunk"   // a byte of chunk Chunk of a file is flipped on disk
	Truncate    FaultKind = "truncate"     // a file loses the end of its last chunk on disk
	StagePanic  FaultKind = "panic"        // a stage of kind Kind panics at its Nth message
	PanicStorm  FaultKind = "panic-storm"  // a stage of kind Kind panics on Count messages in a row from its Nth
	SlowDevice  FaultKind = "slow-device"  // device Device's steps take Delay plus up to Delay more
	StallDevice FaultKind = "stall-device" // device Device's Nth step takes Delay
	PanicDevice FaultKind = "panic-device" // device Device's Nth step panics
)
