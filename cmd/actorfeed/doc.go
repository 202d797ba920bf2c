// Command actorfeed runs, inspects and measures actorfeed input pipelines.
//
//	actorfeed demo   the built-in default: read a data set through
//	                 shuffle -> batch -> prefetch for a few passes and report
//
// With Fashion-MNIST installed (Debian: apt-get install dataset-fashion-mnist)
// the demo reads it; otherwise it writes a synthetic RecordIO data set of the
// same shape to a temporary directory and reads that.
//
// cmd/actorfeed may import every actorfeed package; nothing imports it.
package main
