package readers

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/readers/wds"
)

// The decode cache. A gzip stream has no way back: a reader that starts at
// record n decompresses the n records before it, and the order starts
// readers at every split of a pass (1,024 records), so a pass over a gzip'd
// file (IDX, a WebDataset shard) decompressed it once a split
// (docs/decode-cache.md). The first reader that seeks into one decodes it whole into an
// uncompressed copy, checked as a read checks it, and it and every later
// reader seek in that. A copy is named by what identifies the file as it
// is (its path, size, modification time, device and inode; an object's
// URL, ETag and size), so a changed file gets a copy of its own; it is
// written whole or not at all.

// DecodeCacheEnv is the environment variable that places the decode cache:
// a directory, or "off". Unset, it is actorfeed/decoded in the user's
// cache directory (~/.cache on Linux).
const DecodeCacheEnv = "ACTORFEED_DECODE_CACHE"

// MaxDecodedBytes bounds one decoded copy; a copy must also leave a tenth
// of its file system (and 1 GiB) free, however many there are. A file
// that would break either, or whose decoding fails, is read from its
// stream as before.
const MaxDecodedBytes = 16 << 30

// decoder writes the uncompressed content of the gzip'd file src (size
// bytes, name in errors) to dst, checked as its format checks it, at most
// limit bytes.
type decoder func(dst io.Writer, src io.Reader, size int64, name string, limit int64) error

// decodeIDX checks the copy as an IDX file.
func decodeIDX(dst io.Writer, src io.Reader, size int64, name string, limit int64) error {
	_, err := idx.Decode(dst, src, size, name, limit)
	return err
}

// decodeWDS checks the gzip stream: the tar is checked as it is read.
func decodeWDS(dst io.Writer, src io.Reader, _ int64, name string, limit int64) error {
	return wds.Decode(dst, src, name, limit)
}

// decodeTFRecord checks the gzip stream: the records are checked as they
// are read.
func decodeTFRecord(dst io.Writer, src io.Reader, _ int64, name string, limit int64) error {
	return tfrecord.Decode(dst, src, name, limit)
}

// decodedCopy is the path of an uncompressed copy of the file path of the
// format formatName, made by decode now if it is not there; path itself
// when the file is not gzip'd.
func decodedCopy(formatName, path string, open format.Opener, decode decoder) (string, error) {
	f, size, err := format.OpenFileWith(open, formatName, path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if magic, _ := br.Peek(2); len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return path, nil
	}
	id, err := identity(path, f)
	if err != nil {
		return "", err
	}
	return decodeOnce(id, path, br, size, decode)
}

// decodeOnce is the path of the decoded copy of the gzip'd content id,
// read from src (size bytes, name in errors), made by decode now if it is
// not there.
func decodeOnce(id, name string, src io.Reader, size int64, decode decoder) (string, error) {
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	base := strings.TrimSuffix(name[strings.LastIndexByte(name, '/')+1:], ".gz")
	dst, err := copyOnce(dir, id+"-"+base, DecodeCacheBytesEnv, func(w io.Writer, limit int64) error {
		return decode(w, src, size, name, limit)
	})
	if err != nil {
		return "", fmt.Errorf("readers: decoding %s into %s: %w", name, dst, err)
	}
	return dst, nil
}

// cacheDir is the decode cache's directory.
func cacheDir() (string, error) {
	dir := os.Getenv(DecodeCacheEnv)
	switch dir {
	case "off":
		return "", fmt.Errorf("readers: the decode cache is off (%s=off)", DecodeCacheEnv)
	case "":
		user, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("readers: no decode cache: %w (set %s)", err, DecodeCacheEnv)
		}
		dir = filepath.Join(user, "actorfeed", "decoded")
	}
	return dir, nil
}

// keptIndex is a raw file's index as kept in the decode cache, by the
// file's identity (the shard's spans, whose header scan costs far more
// than reading them back); nil when there is none, or it does not check.
func keptIndex(sf *streamFormat, id string, size int64) streamIndex {
	if sf.loadIndex == nil {
		return nil
	}
	// An index holds 8 bytes a sample and a field, each taking a 512-byte
	// header at least.
	b := keptBytes(id+"."+sf.name+"-index", 1<<20+size/32)
	if b == nil {
		return nil
	}
	ix, err := sf.loadIndex(b, size)
	if err != nil {
		return nil
	}
	return ix
}

// keepIndex keeps a raw file's index in the decode cache, when it can.
func keepIndex(sf *streamFormat, id string, ix streamIndex) {
	if sf.saveIndex == nil {
		return
	}
	if b, err := sf.saveIndex(ix); err == nil {
		keepBytes(id+"."+sf.name+"-index", b)
	}
}

// keptBytes is what keepBytes kept as name in the decode cache, at most
// limit bytes of it; nil when there is none.
func keptBytes(name string, limit int64) []byte {
	dir, err := cacheDir()
	if err != nil {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil
	}
	return b
}

// keepBytes keeps b as name in the decode cache, when it can.
func keepBytes(name string, b []byte) {
	dir, err := cacheDir()
	if err != nil || os.MkdirAll(dir, 0o755) != nil {
		return
	}
	atomicfile.Write(filepath.Join(dir, name), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// objectIdentity names an object's version: a hash of its URL, ETag and
// size. A replaced object has another ETag, so another identity.
func objectIdentity(o *objstore.Object) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", o.URL(), o.ETag(), o.Size()))
	return hex.EncodeToString(h[:16])
}

// identity names the content of path, open as f, as it stands: a hash of
// its absolute path, size, modification time, device and inode.
func identity(path string, f *os.File) (string, error) {
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var dev, ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		dev, ino = uint64(sys.Dev), sys.Ino
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%d", abs, st.Size(), st.ModTime().UnixNano(), dev, ino))
	return hex.EncodeToString(h[:16]), nil
}
