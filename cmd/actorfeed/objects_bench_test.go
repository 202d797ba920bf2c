package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// BenchmarkObjectStoreRatio reads Fashion-MNIST's 60,000 training images
// as RecordIO through run's pipeline (shuffle 4096, batches of 128) from
// the local disk and from a local S3 server (Versity's gateway over the
// same disk), a pass of each an iteration, taking turns at going first.
// "ratio" is the server's samples/s over the disk's; each pass indexes
// its file anew, as a new job does.
func BenchmarkObjectStoreRatio(b *testing.B) {
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
	var disk, objects time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			pass([]string{local}, &disk)
			pass(urls, &objects)
		} else {
			pass(urls, &objects)
			pass([]string{local}, &disk)
		}
	}
	samples := float64(b.N * 60_000)
	b.ReportMetric(disk.Seconds()/objects.Seconds(), "ratio")
	b.ReportMetric(samples/disk.Seconds(), "disk-samples/s")
	b.ReportMetric(samples/objects.Seconds(), "objects-samples/s")
}
