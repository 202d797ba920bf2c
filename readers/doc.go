// Package readers is the synchronous reader library of actorfeed: the
// reader contract of PaddlePaddle Fluid (ReaderBase) in Go form, the file formats
// behind a registry, the decorators that compose readers (shuffle, batch,
// multi-pass, buffered prefetch, map, xmap, compose, chain, firstn, cache),
// the random data generator, the bounded feed queue that outside producers
// push into, WriteRecordFile, which writes the sample files that
// RecordFile reads, the readers of WebDataset shards and TFRecord files
// (stream_file.go), the token corpora of language models, read as packed
// samples (token_file.go, docs/tokens.md), and the decode cache, where a
// gzip'd file a reader seeks into is decoded once (decode_cache.go,
// docs/decode-cache.md). A
// path may be an object's URL, s3://bucket/key, read through
// readers/objstore (objects.go, docs/storage.md), or from its copy in the
// object cache when ACTORFEED_OBJECT_CACHE is set (object_cache.go).
// Both caches may be given a limit in bytes, kept by removing the copies
// used least recently that no process holds (cache_limit.go).
// Expand turns a file list as users write it, with WebDataset's brace
// lists and globs of files or objects, into the files it names (expand.go,
// braces.go). A reader that reads any record by position at the cost of
// that record is Positional (positional.go): IDX, TFRecord and WebDataset
// files, which a global order reads so.
//
// # The contract
//
// A Reader yields one instance or one batch per Next as a tensor.Slots, and
// io.EOF at the end of the data. Reset (PaddlePaddle Fluid's ReInit) starts over; a
// reader that cannot start over returns ErrResetUnsupported. Close releases
// files and goroutines; Next after Close returns ErrClosed. HasNext lives in
// Holder (PaddlePaddle Fluid's ReaderHolder), which looks one item ahead: that is sound
// for a single consumer, which is what a Reader serves. A Reader is not safe
// for concurrent use; the actor runtime (package actors) is the concurrent
// layer.
//
// Errors travel: a source's error reaches the consumer through every
// decorator, the concurrent ones included, and a decorator never turns an
// error into an early io.EOF or a hang. Decorators that start goroutines
// stop and join them in Reset and Close, provided their source honours the
// context given to Next (every reader in this package does).
//
// Decorator constructors panic on parameters that are programming errors (a
// batch size below 1, say), as make does; readers of files return errors.
//
// # Layering
//
// readers imports tensor, its own subpackages (format, what every format
// shares; recordio; idx; wds; tfrecord; tokens) and internal/atomicfile. It must not import
// messages, actors, supervisor, sim or cmd.
package readers
