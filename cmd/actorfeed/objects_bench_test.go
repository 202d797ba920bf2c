package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// BenchmarkObjectStoreRatio reads Fashion-MNIST's 60,000 training images
// as RecordIO through run's pipeline (shuffle 4096, batches of 128) from
// the local disk and from a local S3 server (Versity's gateway over the
// same disk), a pass of each an iteration, taking turns at going first.
// "ratio" is the server's samples/s over the disk's; each pass indexes
// its file anew, as a new job does. In "cached", the object cache is on
// (readers.ObjectCacheEnv): the first pass fetches the object whole, the
// others read its copy, as the epochs of a job do.
func BenchmarkObjectStoreRatio(b *testing.B) {
	b.Run("store", func(b *testing.B) { objectStoreRatio(b) })
	b.Run("cached", func(b *testing.B) {
		b.Setenv(readers.ObjectCacheEnv, b.TempDir())
		objectStoreRatio(b)
	})
}

func objectStoreRatio(b *testing.B) {
	local := filepath.Join(b.TempDir(), "train.recordio")
	_, err := convertIDX(b.Context(), filepath.Join(testutil.FashionDir(b), "train-images-idx3-ubyte.gz"), local, recordio.Snappy)
	require.NoError(b, err)
	srv := s3servertest.Start(b)
	srv.Bucket(b, "bench")
	urls := srv.PutFiles(b, "bench", "fm/", local)
	srv.Env(b, srv.Endpoint)
	sys := actors.NewSystem()
	pass := func(paths []string, took *time.Duration) {
		start := time.Now()
		p, err := actors.NewDevices([]actors.Stage{actors.Files{Paths: paths}, actors.Shuffle{Window: 4096, Seed: 1}, actors.Batch{Size: 128}},
			actors.Devices{N: 1}, actors.Options{System: sys})
		require.NoError(b, err)
		require.NoError(b, p.Run(b.Context()))
		require.NoError(b, p.Close())
		*took += time.Since(start)
	}
	// The first iteration's passes apart: with the cache on, its object
	// pass fetches the object ("later-ratio" is of the passes after it).
	var disk, objects, firstDisk, firstObjects time.Duration
	asked, _ := objstore.Totals()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			pass([]string{local}, &disk)
			pass(urls, &objects)
		} else {
			pass(urls, &objects)
			pass([]string{local}, &disk)
		}
		if i == 0 {
			firstDisk, firstObjects = disk, objects
		}
	}
	samples := float64(b.N * 60_000)
	requests, _ := objstore.Totals()
	b.ReportMetric(float64(requests-asked)/float64(b.N), "requests/pass")
	b.ReportMetric(disk.Seconds()/objects.Seconds(), "ratio")
	if b.N > 1 {
		b.ReportMetric((disk-firstDisk).Seconds()/(objects-firstObjects).Seconds(), "later-ratio")
	}
	b.ReportMetric(samples/disk.Seconds(), "disk-samples/s")
	b.ReportMetric(samples/objects.Seconds(), "objects-samples/s")
}
