// Command actorfeed runs, inspects and measures actorfeed input pipelines.
//
//	actorfeed demo      the built-in default: train a softmax-regression
//	                    classifier data-parallel on 2 device actors fed by
//	                    open_files -> shuffle -> batch -> double buffer, and
//	                    report the test accuracy
//	actorfeed run       run a pipeline from flags or a YAML program on
//	                    simulated devices; progress, summary, --emit-ids
//	actorfeed sim       fault-injection scenarios and the invariant checker
//	actorfeed bench     the actor pipeline against a plain copy, a plain read
//	                    and a channel pipeline, side by side; with --sizes
//	                    and --procs, a matrix of sample sizes and cores
//	actorfeed gen       write a synthetic data set: RecordIO, or JPEG shards
//	actorfeed convert   convert IDX (Fashion-MNIST) to RecordIO, WebDataset or
//	                    TFRecord, or an image folder to shards
//	actorfeed write     write the samples on stdin as WebDataset, TFRecord
//	                    or RecordIO shards (the Python ShardWriter runs it)
//	actorfeed inspect   show a data file's contents and damage: RecordIO
//	                    chunks, IDX headers, WebDataset members and samples,
//	                    TFRecord records and features
//	actorfeed serve     a data service worker that reads and batches for
//	                    trainers on other machines (run --service)
//	actorfeed verify-ids
//	                    check a job's --emit-ids files, every rank and run:
//	                    every record of every epoch exactly once
//	actorfeed feed      feed the Python loader (python/, docs/python.md):
//	                    batches in a shared-memory ring, descriptions and
//	                    states over a socket; the loader starts it
//
// With Fashion-MNIST installed (Debian: apt-get install dataset-fashion-mnist)
// the demo trains on it; otherwise on a synthetic data set of the same shape.
// Errors are one line on stderr and a non-zero exit status (2 for a bad
// command line).
//
// cmd/actorfeed may import every actorfeed package; nothing imports it.
package main
