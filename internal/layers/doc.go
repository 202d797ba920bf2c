// Package layers holds the test that enforces the import table of
// docs/architecture.md: no package depends, directly or through others, on
// a package its row says it must not import. It has no code of its own.
package layers
