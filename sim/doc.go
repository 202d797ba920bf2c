// Package sim will hold fault injection (file system, actors, devices) and
// the invariant checker that proves a pipeline loses, duplicates and leaks
// nothing under seeded, replayable fault schedules (issue 5). No code has
// landed yet.
//
// sim may import every package except cmd.
package sim
