package readers

import (
	"context"
	"time"

	"github.com/actorfeed/actorfeed/readers/objstore"
)

// openObject opens the object at url through opts.Objects, or the
// process's store, read from its copy when the object cache is on
// (object_cache.go). Its reads end with opts' context (OpenContext).
func openObject(opts OpenOptions, url string) (*objstore.Object, error) {
	s := opts.Objects
	ctx := opts.Context()
	if s == nil {
		lookup, cancel := context.WithTimeout(ctx, objstore.Lookup)
		defer cancel()
		var err error
		if s, err = objstore.Default(lookup); err != nil {
			return nil, err
		}
	}
	o, err := s.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := cacheObject(o, opts.ObjectCache); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// versionOf is the version (ETag) of the object src reads, "" for a file.
func versionOf(src any) string {
	if o, ok := src.(*objstore.Object); ok {
		return o.ETag()
	}
	return ""
}

// modifiedOf is when the object src reads was written; zero for a file
// (the pipeline asks the file system).
func modifiedOf(src any) time.Time {
	if o, ok := src.(*objstore.Object); ok {
		return o.Modified()
	}
	return time.Time{}
}
