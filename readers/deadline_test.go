package readers_test

import "time"

// testDeadline bounds tests that must end on their own: a hang fails the
// test instead of the whole run. It is a guard, not synchronization.
const testDeadline = 30 * time.Second
