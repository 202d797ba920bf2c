// Package tokens reads token corpora as language-model pretraining keeps
// them, by position and through the page cache: Megatron-LM's indexed
// datasets (PREFIX.bin, the tokens of every sequence one after the other,
// and PREFIX.idx, their lengths, byte offsets and document ranges) and
// llm.c's token files (a header of 256 int32, then uint16 or uint32
// tokens). docs/tokens.md gives both layouts.
//
// A Corpus is either, opened: its tokens are read by their offset in the
// corpus (ReadTokens, one pread), and Sample packs a sample of
// consecutive tokens across sequences, finding the sequences that start
// inside it in a few KiB of the index. Nothing of a corpus is copied into
// the heap but what a caller reads and, of an indexed dataset, the first
// token of every IndexStride-th sequence and of every group of
// DocumentGroup sequences: 8 bytes for each, so memory grows with a
// dataset's sequences at 1/1024 and 1/64 of their count.
//
// Opening a corpus checks its header against the files' real sizes before
// anything is sized by it, and an indexed dataset's whole index once, in a
// constant memory: lengths that are negative or sum past the .bin, offsets
// that are not the lengths' running sum, document ranges out of order.
// Failures are *format.Error values naming the file and the offset of what
// is wrong, matching format.ErrCorrupt where the files are damaged.
//
// An epoch packs an indexed dataset's documents in an order of its own
// (EpochOrder): groups of DocumentGroup sequences permuted, and the
// sequences inside each group, keyed by a seed and the epoch.
//
// tokens imports readers/format and readers/order (for the permutation of
// groups).
package tokens
