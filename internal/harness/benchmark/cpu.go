package benchmark

import (
	"syscall"
	"time"

	"github.com/prometheus/procfs"
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

// ProcessCPUTime is the CPU time process pid has used, user and system, as
// Linux's /proc tells it (in clock ticks, 10 ms); 0 where there is no
// /proc or the process is gone. The data service's bench adds its worker
// processes' time to its own.
func ProcessCPUTime(pid int) time.Duration {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return time.Duration(st.CPUTime() * float64(time.Second))
}
