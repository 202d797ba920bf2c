// Package protocol is the stages' protocol (docs/protocol.md) as pure
// state machines, in the manner of etcd's raft: a Machine takes one
// message at a time (Step) and puts the messages it decides to send in an
// Outbox; nothing in it is an actor, goroutine, channel or clock. Package
// actors runs them, one generic actor for any Machine, and keeps them in
// cells that outlive restarts. Table tests and fuzz targets drive them
// bare, checking every link's invariants after each step.
//
// What it holds:
//   - link.go: the stream protocol (subscribe, demand, cancel), written
//     once: Outlet, a publisher's half, and Inlet, a subscriber's. The
//     in-process stages, the file readers, the devices and the data
//     service's client all use them.
//   - relay.go: RelayMachine, a decorator stage between two links, and
//     the Logic it applies (shuffle.go, multipass.go; batch and map, which
//     need the pipeline's storage, are package actors').
//   - files.go: open_files, which deals its readers the order's units;
//     order_assembly.go: the order's windows and units over a Plan
//     (plan.go), the rank's share of each pass.
//   - fanout.go: the deal and the double buffer; merge.go: the lanes'
//     merge; xmap.go: xmap's protocol, whose workers its actor owns.
//   - service.go: the data service's client, ServiceMachine: its tasks
//     and attempts (service_tasks.go), its workers' sessions and leases
//     (service_workers.go), time read from an injected clock.
//   - instances.go: samples cut from items without copying, which the
//     shuffle, the windows and the batch stage hold.
//
// protocol may import messages (and protobuf, to size them), supervisor
// (to classify errors), readers/order and protoactor-go's actor (for
// PIDs). Only actors imports it.
package protocol
