package readers

import (
	"context"
	"errors"
	"fmt"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/idx"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/tensor"
)

// idxFile reads an IDX file, paired with its labels file when one exists
// next to an images file by the MNIST naming convention: then items are
// (image, label); otherwise each item is the file's one slot.
//
// It seeks (Seek): in a raw file by offset; a gzip'd file is first swapped
// for its decoded copy (decodedCopy), made once, so that a reader started
// anywhere in it does not decompress it from the start.
type idxFile struct {
	images, labels string // the files named, which errors name
	// readImages and readLabels are what is read: the files, or their
	// decoded copies.
	readImages, readLabels string
	opener                 format.Opener
	one                    *idx.Reader
	pair                   *idx.Pair
	closed                 bool
}

func openIDX(path string, opts OpenOptions) (Reader, error) {
	if objstore.IsURL(path) {
		return nil, fmt.Errorf("idx: %s: IDX files are read from local disk only: copy it, or convert it (actorfeed convert)", path)
	}
	r := &idxFile{images: path, readImages: path, opener: opts.Open}
	r.labels, _ = idx.CompanionLabels(path)
	r.readLabels = r.labels
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *idxFile) open() error {
	// A decoded copy is the cache's, not a file the opener was given.
	opener := func(read, named string) format.Opener {
		if read != named {
			return nil
		}
		return r.opener
	}
	images, err := idx.OpenNamed(opener(r.readImages, r.images), r.readImages, r.images)
	if err != nil || r.labels == "" {
		r.one = images
		return err
	}
	labels, err := idx.OpenNamed(opener(r.readLabels, r.labels), r.readLabels, r.labels)
	if err != nil {
		images.Close()
		return err
	}
	if a, b := images.Header().Samples(), labels.Header().Samples(); a != b {
		images.Close()
		labels.Close()
		return &format.Error{Format: "idx", File: r.labels, Chunk: -1, Record: -1,
			Err: format.Corrupt("%d labels for %d images in %s", b, a, r.images)}
	}
	r.pair = &idx.Pair{Images: images, Labels: labels}
	return nil
}

func (r *idxFile) Next(ctx context.Context) (tensor.Slots, error) {
	if r.closed {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.pair == nil && r.one == nil {
		return nil, fmt.Errorf("readers: %s could not be reopened by Reset", r.images)
	}
	if r.pair != nil {
		img, lbl, err := r.pair.Next()
		if err != nil {
			return nil, err
		}
		return tensor.Slots{{Tensor: img}, {Tensor: lbl}}, nil
	}
	t, err := r.one.Next()
	if err != nil {
		return nil, err
	}
	return tensor.Slots{{Tensor: t}}, nil
}

// SlotNames names the slots of an images file paired with its labels.
func (r *idxFile) SlotNames() []string {
	if r.labels == "" {
		return nil
	}
	return []string{"image", "label"}
}

// NextStacked reads the next sample onto st when it stacks (see
// tensor.Stack) and returns nil; otherwise it returns it as Next does. A
// group of samples then travels as one tensor a slot, not a part each.
func (r *idxFile) NextStacked(ctx context.Context, st *tensor.Stack) (tensor.Slots, error) {
	item, err := r.Next(ctx)
	if err != nil || !st.Append(item) {
		return item, err
	}
	return nil, nil
}

// Seek moves the reader to sample n. Past the first sample of a gzip'd
// file it reads the decoded copy, or, where none can be made (the cache
// off or full, the file damaged), decompresses forward to n.
func (r *idxFile) Seek(n int) error {
	if r.closed {
		return ErrClosed
	}
	if r.pair == nil && r.one == nil {
		return fmt.Errorf("readers: %s could not be reopened by Reset", r.images)
	}
	if n > 0 && r.gzipped() {
		r.useDecoded()
	}
	if r.pair != nil {
		return r.pair.Seek(n)
	}
	return r.one.Seek(n)
}

// Count is the file's samples as its header declares them, when that is
// known to be right: a raw file's size was checked against its header, and
// a gzip'd file's decoded copy was checked whole as it was made (a fresh
// reader is moved to it). Otherwise the caller counts by reading, which finds the damage: the error is ErrUncounted.
func (r *idxFile) Count() (uint64, error) {
	if r.closed || r.pair == nil && r.one == nil {
		return 0, ErrUncounted
	}
	if r.gzipped() {
		r.useDecoded()
	}
	switch {
	case r.gzipped():
		return 0, ErrUncounted
	case r.pair != nil:
		return uint64(r.pair.Images.Header().Samples()), nil
	}
	return uint64(r.one.Header().Samples()), nil
}

// gzipped reports whether a file being read is still a gzip stream.
func (r *idxFile) gzipped() bool {
	if r.pair != nil {
		return r.pair.Images.Gzipped() || r.pair.Labels.Gzipped()
	}
	return r.one.Gzipped()
}

// useDecoded reopens the reader on the files' decoded copies, at sample
// 0, when they can be had; otherwise it leaves it as it was.
func (r *idxFile) useDecoded() {
	images, err := decodedCopy("idx", r.images, r.opener, decodeIDX)
	if err != nil {
		return
	}
	labels := r.labels
	if labels != "" {
		if labels, err = decodedCopy("idx", r.labels, r.opener, decodeIDX); err != nil {
			return
		}
	}
	was := [2]string{r.readImages, r.readLabels}
	r.close()
	r.readImages, r.readLabels = images, labels
	if r.open() != nil { // the copy went (a cleaned cache): read the files
		r.close()
		r.readImages, r.readLabels = was[0], was[1]
		r.open()
	}
}

func (r *idxFile) close() error {
	var err error
	if r.pair != nil {
		err = r.pair.Close()
	} else if r.one != nil {
		err = r.one.Close()
	}
	r.pair, r.one = nil, nil
	return err
}

func (r *idxFile) Reset() error {
	if r.closed {
		return ErrClosed
	}
	return errors.Join(r.close(), r.open())
}

func (r *idxFile) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return r.close()
}
