package objstore

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
)

// Upload writes the file at local to the object at url, whole or not at
// all: one PUT, or past 16 MiB a multipart upload (8 MiB parts, a few at
// a time) that is aborted when any part fails. The store's Stats count
// reads, not uploads.
func (s *Store) Upload(ctx context.Context, url, local string) error {
	u, err := ParseURL(url)
	if err != nil {
		return err
	}
	if u.Key == "" || strings.HasSuffix(u.Key, "/") {
		return fmt.Errorf("objstore: %s: an object's URL ends in its name", url)
	}
	f, err := os.Open(local)
	if err != nil {
		return fmt.Errorf("objstore: uploading to %s: %w", url, err)
	}
	defer f.Close()
	_, err = transfermanager.New(s.client).UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: &u.Bucket, Key: &u.Key, Body: f})
	if err != nil {
		return describe(u, err)
	}
	return nil
}
