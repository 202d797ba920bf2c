package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Object is one version of an object, read by ranges. Its reads go on
// until Close, which ends any under way. ReadAt is safe for concurrent
// use; Read and Seek are not.
type Object struct {
	store  *Store
	url    URL
	size   int64
	etag   string
	mod    time.Time
	ctx    context.Context
	cancel context.CancelFunc
	off    int64 // Read's and Seek's
	ahead  readAhead
	// readBuf holds the object's bytes from readAt on: Read reads a range
	// at a time, so that a reader's small reads (a TFRecord length, a gzip
	// stream's buffer) are not a request each.
	readBuf []byte
	readAt  int64
	// local, when set, holds this version whole (a copy on disk): reads
	// are served from it, and no request is made.
	local       io.ReaderAt
	localCloser io.Closer
}

// readRange is the range Read asks for at a time.
const readRange = 256 << 10

// Lookup bounds looking an object up (its HEAD, retries included).
const Lookup = 2 * time.Minute

// Open looks the object at url up: its size and the version (ETag) every
// read of it then asks for. The look-up takes at most Lookup. ctx is the
// object's: its reads, which come later from readers that hold no
// context, end when ctx does (a job stopped, a reader's watchdog) or at
// Close, whichever comes first.
func (s *Store) Open(ctx context.Context, url string) (*Object, error) {
	u, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	lookup, cancel := context.WithTimeout(ctx, Lookup)
	defer cancel()
	s.asked()
	head, err := s.client.HeadObject(lookup, &s3.HeadObjectInput{Bucket: &u.Bucket, Key: &u.Key})
	if err != nil {
		err = describe(u, err)
		if errors.Is(err, ErrNoObject) {
			err = s.whyNotFound(lookup, u, err)
		}
		return nil, err
	}
	o := &Object{store: s, url: u, size: aws.ToInt64(head.ContentLength), etag: aws.ToString(head.ETag),
		mod: aws.ToTime(head.LastModified)}
	o.ctx, o.cancel = context.WithCancel(ctx)
	return o, nil
}

// whyNotFound says why a HEAD of u found nothing (err): a HEAD's answer
// has no body, so no error code, and a missing bucket, a missing object
// and, on some servers (Versity's gateway), an unknown access key all
// answer 404. A GET of the first byte answers with the code.
func (s *Store) whyNotFound(ctx context.Context, u URL, err error) error {
	s.asked()
	out, gerr := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &u.Bucket, Key: &u.Key, Range: aws.String("bytes=0-0")})
	if gerr == nil {
		out.Body.Close()
		return err
	}
	return describe(u, gerr)
}

// Size is the object's size in bytes.
func (o *Object) Size() int64 { return o.size }

// ETag is the version of the object that is read.
func (o *Object) ETag() string { return o.etag }

// Modified is when the version read was written (its LastModified): a
// refused resume names the objects written after its state's data.
func (o *Object) Modified() time.Time { return o.mod }

// URL names the object.
func (o *Object) URL() string { return o.url.String() }

// ServeFrom makes every later read of o a read of local, a complete copy
// of the version opened (Size bytes, which the caller checked), and Close
// close c. Call it before the first read: the object cache serves an
// object's reads from disk once it fetched it whole.
func (o *Object) ServeFrom(local io.ReaderAt, c io.Closer) { o.local, o.localCloser = local, c }

// Local reports whether o's reads are served from a local copy (ServeFrom).
func (o *Object) Local() bool { return o.local != nil }

// ReadAt reads len(p) bytes at off by ranged GETs of the version opened; a
// body cut off is read on from the byte it reached. Reads that move
// forward through the object are served from its read-ahead (ahead.go).
// It returns io.EOF when the object ends before p is full.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: read at %d", o.url, off)
	}
	if off >= o.size {
		return 0, io.EOF
	}
	want := p[:min(int64(len(p)), o.size-off)]
	if o.local != nil {
		n, err := o.local.ReadAt(want, off)
		total.copied.Add(int64(n))
		if err == nil && n < len(p) {
			err = io.EOF
		}
		return n, err
	}
	n := o.ahead.serve(want, off)
	if n < len(want) {
		got, err := o.fetch(want[n:], off+int64(n))
		n += got
		if err != nil {
			return n, err
		}
	}
	o.ahead.next(o, off, off+int64(n))
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// fetch reads exactly p at off (within the object), retrying a body cut
// off from the byte it reached.
func (o *Object) fetch(p []byte, off int64) (int, error) {
	n := 0
	for attempt := 1; len(p) > n; attempt++ {
		got, err := o.get(p[n:], off+int64(n))
		n += got
		if err == nil {
			continue
		}
		if !errors.Is(err, errBody) {
			return n, err
		}
		if attempt >= o.store.opts.Attempts {
			return n, retryable{err}
		}
		if err := sleep(o.ctx, o.store.backoff(attempt)); err != nil {
			return n, fmt.Errorf("%s: %w", o.url, err)
		}
	}
	return n, nil
}

// errBody marks a body cut off: what a read goes on from.
var errBody = errors.New("reading an object's body")

// get reads p from off in one ranged GET, which must deliver it within
// the store's body deadline (Options.MinRate); the request itself is the
// SDK's to retry.
func (o *Object) get(p []byte, off int64) (int, error) {
	o.store.asked()
	in := &s3.GetObjectInput{
		Bucket: &o.url.Bucket,
		Key:    &o.url.Key,
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1)),
	}
	if o.etag != "" { // a store that gives no ETag cannot pin a version
		in.IfMatch = aws.String(o.etag)
	}
	deadline := o.store.bodyDeadline(len(p))
	ctx, cancel := context.WithTimeout(o.ctx, deadline)
	defer cancel()
	out, err := o.store.client.GetObject(ctx, in)
	switch {
	case err == nil:
	case o.ctx.Err() != nil:
		return 0, fmt.Errorf("%s: %w", o.url, context.Cause(o.ctx))
	case ctx.Err() != nil:
		return 0, fmt.Errorf("%s at byte %d: %w: no answer within %v", o.url, off, errBody, deadline)
	default:
		return 0, describe(o.url, err)
	}
	defer func() {
		// Read on past the last byte asked for, a little: a body closed
		// before its end closes its connection, and every GET would then
		// dial a new one; but a body that goes on (a server that sends
		// more than the range, or never ends) is not read for ever.
		_, _ = io.CopyN(io.Discard, out.Body, drainBytes)
		out.Body.Close()
	}()
	n, err := io.ReadFull(out.Body, p)
	o.store.read(n)
	switch {
	case err == nil:
		return n, nil
	case o.ctx.Err() != nil:
		return n, fmt.Errorf("%s: %w", o.url, context.Cause(o.ctx))
	case ctx.Err() != nil:
		return n, fmt.Errorf("%s at byte %d: %w: %d of %d bytes within %v, slower than %d bytes a second",
			o.url, off+int64(n), errBody, n, len(p), deadline, o.store.opts.MinRate)
	}
	return n, fmt.Errorf("%s at byte %d: %w: %w", o.url, off+int64(n), errBody, err)
}

// drainBytes is the most get reads of a body past the range it asked for.
const drainBytes = 64 << 10

// ReadUntil says that the reader means to stop at byte until: the
// read-ahead fetches nothing from there on, until a read passes it. A
// reader dealt a stretch of an object (a split of a shard) so wastes no
// windows past the stretch's end.
func (o *Object) ReadUntil(until int64) { o.ahead.bound(until) }

// Read reads on from where the last Read or Seek left off.
func (o *Object) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if o.off >= o.size {
		return 0, io.EOF
	}
	if o.off < o.readAt || o.off >= o.readAt+int64(len(o.readBuf)) {
		if len(p) >= readRange {
			n, err := o.ReadAt(p, o.off)
			o.off += int64(n)
			if n > 0 && errors.Is(err, io.EOF) {
				err = nil
			}
			return n, err
		}
		if o.readBuf == nil {
			o.readBuf = make([]byte, readRange)
		}
		n, err := o.ReadAt(o.readBuf[:min(readRange, o.size-o.off)], o.off)
		o.readBuf, o.readAt = o.readBuf[:n], o.off
		if n == 0 {
			return 0, err
		}
	}
	n := copy(p, o.readBuf[o.off-o.readAt:])
	o.off += int64(n)
	return n, nil
}

// Seek sets where Read reads on from.
func (o *Object) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += o.off
	case io.SeekEnd:
		offset += o.size
	}
	if offset < 0 {
		return 0, fmt.Errorf("%s: seek to %d", o.url, offset)
	}
	o.off = offset
	return offset, nil
}

// Close ends the reads under way and any to come, and waits for the
// read-ahead's.
func (o *Object) Close() error {
	o.cancel()
	o.ahead.wait()
	if c := o.localCloser; c != nil {
		o.localCloser = nil
		return c.Close()
	}
	return nil
}
