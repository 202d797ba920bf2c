//go:build unix

package format

import "syscall"

// openNonBlocking makes opening a named pipe return at once instead of
// waiting for a writer; reads of a regular file ignore it.
const openNonBlocking = syscall.O_NONBLOCK
