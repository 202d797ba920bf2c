package readers

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/actorfeed/actorfeed/readers/objstore"
)

// The object cache. A pass reads every object it orders again, and so
// does every epoch: from a store whose server shares the trainer's cores,
// or one that charges by the request or the byte, that costs each epoch
// what the first one cost (docs/storage.md). With the cache on, an object
// is fetched whole the first time it is opened, into a copy named by its
// URL, ETag and size (a process that finds another fetching it waits for
// that copy: copy_once.go), and every read of it, in this process or a
// later one, is a read of that copy. Each open still looks the object up
// (one HEAD), so a replaced object is a new version, fetched anew, and a
// job pinned to the old one fails as it does without the cache.

// ObjectCacheEnv is the environment variable that turns the object cache
// on: the directory of its copies. Unset or empty, objects are read from
// their store.
const ObjectCacheEnv = "ACTORFEED_OBJECT_CACHE"

// errNoRoom is a copy the cache's limits refuse: the object is read from
// its store instead.
var errNoRoom = errors.New("no room for the copy")

// cacheObject serves o's reads from its copy in the object cache dir
// (when "", ObjectCacheEnv's), if the cache is on, fetching the copy
// first when it is not there. An object the cache has no room for, or
// whose copy cannot be written or opened, is read from its store as
// before; a fetch that fails (the object replaced, the store unreachable
// after its retries) is the open's error.
func cacheObject(o *objstore.Object, dir string) error {
	if dir == "" {
		dir = os.Getenv(ObjectCacheEnv)
	}
	if dir == "" {
		return nil
	}
	var fetchErr error
	name := objectIdentity(o) + "-" + path.Base(o.URL())
	dst, err := copyOnce(dir, name, ObjectCacheBytesEnv, func(w io.Writer, limit int64) error {
		if o.Size() > limit {
			return errNoRoom
		}
		src := &readErr{r: io.NewSectionReader(o, 0, o.Size())}
		// Plain Writer and Reader: a file's ReadFrom would read in 32 KiB
		// pieces; ranges of a MiB keep the read-ahead's windows large.
		_, err := io.CopyBuffer(struct{ io.Writer }{w}, src, make([]byte, 1<<20))
		fetchErr = src.err
		return err
	})
	if fetchErr != nil {
		return fmt.Errorf("fetching a copy for the object cache (%s): %w", ObjectCacheEnv, fetchErr)
	}
	if err != nil {
		return nil
	}
	f, err := os.Open(dst)
	if err != nil {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Size() != o.Size() {
		f.Close()
		return nil // not a copy this cache wrote: read the store
	}
	o.ServeFrom(f, f)
	return nil
}

// readErr remembers the error its reader returned, other than io.EOF: the
// store's, told apart from the copy's own.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
