// Package service runs actorfeed's data service on Proto.Actor remote: a
// Node is an actor system that other machines reach over gRPC, hardened as
// the remote is not by itself (docs/distributed.md). Workers (actorfeed
// serve) run a Node and a Worker (worker.go): for each task a pipeline of
// its own, read within its data roots (data_roots.go), its batches sent
// under the client's credit. A trainer runs a Node and gives its system to
// a pipeline with actors.Options.Service, whose client (package actors)
// deals the tasks.
//
// A Node listens on loopback unless given mutual TLS; recovers the panics a
// peer's malformed message causes in the remote's gRPC handlers; bounds
// messages (MaxMessage) and keeps (largest message x writer batch) under the
// receive limit, so that no frame is dropped for its size; registers no
// kinds, so no peer can spawn an actor on it; and sends gRPC keepalives,
// so that a peer that stops answering is seen.
//
// It owns the network configuration and the worker's side of the protocol
// (tasks, credit, leases, fencing); the client's side is package actors'.
// It must not import sim or cmd.
package service
