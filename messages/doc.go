// Package messages will hold the protocol between pipeline stages as
// protobuf messages (demand, batches with (epoch, sequence), end of data,
// errors, cancel), so that the same messages can cross process boundaries.
// It is specified in docs/protocol.md once it exists (issue 3); no code has
// landed yet.
//
// messages may import tensor. It must not import readers, actors,
// supervisor, sim or cmd.
package messages
