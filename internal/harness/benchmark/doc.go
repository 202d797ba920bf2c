// Package benchmark holds the measurements of the actor pipeline that
// `actorfeed bench` and the go test benchmarks (actors/bench_test.go) share,
// so that both report the same figures the same way: one pass and its time
// to the first batch (Config.Pass), what a device sees with a simulated
// step (Config.Device: busy fraction, waits at pass boundaries), and
// allocations and the heap over many passes (Config.Memory).
//
// The pipeline measured is open_files -> shuffle -> batch -> double buffer
// -> one device, over one RecordIO file.
//
// benchmark may import actors, tensor and protoactor. Only benchmarks and
// the CLI's bench command import it.
package benchmark
