// Package order defines the order in which a data set's records are
// delivered: a pure function of the data set's splits, a seed, the epoch
// and the sharding (rank, world size). It is arithmetic only; package
// actors reads the files in this order, and docs/determinism.md describes
// the function and its shuffle's quality.
//
// Epoch e's global order over the N records of the data set:
//
//  1. The splits (a RecordIO file's chunks, or runs of records of other
//     formats) are permuted by a generator seeded (seed, e). Their records,
//     in file order within each split, make the sequence S.
//  2. S is cut into windows of Window records, and each window is permuted
//     by a generator seeded (seed, e, window index). The result is the
//     global order G: G[j*Window+i] = S[j*Window+perm_j(i)].
//  3. The positions still to deliver (all of G at the start of an epoch)
//     are cut into World equal, contiguous shards, one per rank; the
//     remainder is dropped or padded (Remainder). With a global batch
//     (Layout.GlobalBatch) they are cut into steps of that many positions
//     instead, and each rank takes its slice of every step (StepSlice), so
//     that a step is the same positions on any World.
//
// Reading stays sequential within splits, a rank reads only the windows its
// shard covers, and G does not depend on the world size, so an epoch can
// be re-cut among another number of ranks part way through (Layout.Regroup).
//
// A global order (Config.Global) replaces steps 1 and 2: G position p is
// the data set's record Permutation(p), a keyed bijection of [0, N)
// computed position by position (permutation.go), and its pieces are runs
// of positions of a virtual file, whose records a reader reads by
// position. Step 3 is the same.
//
// A blend (Config.Blend, blend.go) replaces steps 1 and 2 too: G position
// p of epoch e goes to the file that a tree of the files' weights gives
// position e*N+p of the run, as that file's q-th position, which reads
// record q mod (its records) of the file's own epoch. Step 3 is the same.
//
// Layering: order imports only the standard library.
package order
