// Package format is the implementer side of actorfeed's file formats: what
// every format package shares, kept apart from the user API in package
// readers the way database/sql/driver is kept apart from database/sql.
//
// It owns the one corruption error class (ErrCorrupt) that errors.Is matches
// whatever the format, and Error, which names the file, chunk, record and
// byte offset of a failure so that a supervisor can report or skip it;
// OpenFile, which opens a format's regular files; and ErrWriter, which
// tells a decoder's write failures from damage to what it reads; and the
// gzip streams every format may come in (GzipReader, Gunzip).
//
// format imports only the standard library and klauspost/compress. Format
// packages (recordio, idx, wds, tfrecord) import it; it must not import
// them, package readers, or anything above.
package format
