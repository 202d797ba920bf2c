// Package netsim is actorfeed's proving ground for the data service
// (actors.Options.Service) under network faults, as sim is for pipelines
// in one process: Generate draws scenarios of workers behind
// fault-injecting TCP proxies (Proxy: delays, dropped, stalled and cut
// connections) and crashed, slow and frozen workers; Run runs one, its
// workers as processes (Config.WorkerCommand, actorfeed serve) or as nodes
// in this process, and checks its batches against the same pipeline in one
// process, the service stage's credit bound, no hang, and that every
// worker stopped cleanly (docs/distributed.md). Hostile puts a trainer that
// breaks every rule it can (a tiny lease, huge credit, a reconnect storm)
// beside a well-behaved one, which must be served exactly once.
//
// netsim may import sim and service; not cmd or the harnesses.
package netsim
