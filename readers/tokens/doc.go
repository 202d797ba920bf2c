// Package tokens reads token corpora as language-model pretraining keeps
// them, by position and through the page cache: Megatron-LM's indexed
// datasets (PREFIX.bin, the tokens of every sequence one after the other,
// and PREFIX.idx, their lengths, byte offsets and document ranges) and
// llm.c's token files (a header of 256 int32, then uint16 or uint32
// tokens). docs/tokens.md gives both layouts.
//
// A Corpus is either, opened: its tokens are read by their offset in the
// corpus (ReadTokens, one pread), and a sequence's start and length are
// found by the token they hold (Locate), so that a sample of consecutive
// tokens that crosses sequences costs one read of the tokens and a few of
// the index. Nothing is copied into the heap but what a caller reads, and
// a small sample of the index (one offset in IndexStride), so memory is
// bounded by a few pages whatever the corpus's size.
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
