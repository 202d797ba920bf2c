// Package service runs actorfeed's data service on Proto.Actor remote: a
// Node is an actor system that other machines reach over gRPC, hardened as
// the remote is not by itself (docs/distributed.md). Workers (actorfeed
// serve) run a Node and an actors.Worker; a trainer runs a Node and gives
// its system to a pipeline with actors.Options.Service.
//
// A Node listens on loopback unless given mutual TLS; recovers the panics a
// peer's malformed message causes in the remote's gRPC handlers; bounds
// messages (MaxMessage) and keeps (largest message x writer batch) under the
// receive limit, so that no frame is dropped for its size; registers no
// kinds, so no peer can spawn an actor on it; and sends gRPC keepalives,
// so that a peer that stops answering is seen.
//
// It owns the network configuration; the protocol (tasks, credit, leases,
// fencing) is package actors'. It must not import sim or cmd.
package service
