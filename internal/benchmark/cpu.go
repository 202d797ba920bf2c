package benchmark

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time the process has used, user and system (0 when
// the system does not tell it).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
