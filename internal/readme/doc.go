// Package readme holds the test that compiles every Go snippet of the
// repository's README, so that what a new user copies builds as written.
// It has no code of its own.
package readme
