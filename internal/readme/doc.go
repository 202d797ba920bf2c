// Package readme holds the tests of the repository's README: every Go
// snippet compiles, so that what a new user copies builds as written, and
// its test command runs every test built without the race detector. It
// has no code of its own.
package readme
