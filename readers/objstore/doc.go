// Package objstore reads objects of S3-compatible stores (AWS S3, MinIO,
// Versity's gateway, ...) as format readers read files: an Object is an
// io.ReaderAt of a known size, pinned to the version it had when opened.
//
// URLs are s3://bucket/key. The client is AWS's Go SDK, configured from
// the standard environment and files (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE,
// AWS_ENDPOINT_URL, the shared credentials file); with an endpoint of its
// own (a local server) it addresses buckets by path, as such servers expect.
//
// A read is a ranged GET with If-Match on the ETag the object had when
// opened, so an object replaced during a job is an error naming it
// (ErrReplaced), never a mix of two versions. A request that fails in a
// way retrying can mend (5xx, throttling, a refused or reset connection)
// is retried by the SDK with backoff; a body cut off mid-read is read on
// from the byte it reached, with backoff, up to Options.Attempts. A
// connection silent for Options.Stall, or a body slower than
// Options.MinRate, is given up and tried again alike; a body is read no
// further than its range (bounded.go), and reads end with the context an
// object was opened under. What
// retrying cannot mend (no bucket, no object, no permission, wrong
// credentials) fails at once with one line naming the URL.
//
// Reads that go on where the last ended are read ahead in bounded windows
// (ahead.go); Glob lists a pattern's matches over all pages of a listing,
// within bounds, and refuses a listing that loops;
// Upload writes an object whole or not at all (one PUT, or a multipart
// upload aborted on failure). Stats and Totals count requests and bytes.
//
// objstore imports no other package of this module.
package objstore
