//go:build !unix

package format

// openNonBlocking is not needed where there are no named pipes to open.
const openNonBlocking = 0
