// Package supervisor will hold restart policies, restart intensity limits
// and escalation for a pipeline's stages, with error classes (corrupt
// record, transient I/O error, panic) and their policies (issue 3). No code
// has landed yet.
//
// supervisor may import readers/format (for the corruption class) and
// messages. It must not import actors, sim or cmd.
package supervisor
