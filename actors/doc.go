// Package actors will hold the stage actors built on protoactor-go: a
// supervised actor per file reader, decorator and device consumer,
// exchanging batch messages under credit-based backpressure, and the
// pipeline handle that trainers call (issue 3). No code has landed yet.
//
// actors may import tensor, readers, messages and supervisor. It must not
// import sim or cmd.
package actors
