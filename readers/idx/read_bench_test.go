//go:build linux

package idx_test

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers/idx"
)

// BenchmarkRandomSample measures what a global order pays for one record
// of 784 bytes at a random position of a 47 MB IDX file in the page cache:
// SampleInto's pread, against a copy out of a mapping of the file that
// stays mapped (every page touched then counts in the RSS), and the cost of
// entering the kernel at all (getppid). docs/performance.md ("The global
// order") quotes them.
//
//	go test -run '^$' -bench RandomSample -count 3 ./readers/idx
func BenchmarkRandomSample(b *testing.B) {
	const n, size = 60000, 784
	header := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{0, 0, 8, 2}, n), size)
	path := filepath.Join(b.TempDir(), "data-idx2-ubyte")
	require.NoError(b, os.WriteFile(path, append(header, make([]byte, n*size)...), 0o644))
	r, err := idx.Open(path)
	require.NoError(b, err)
	defer r.Close()
	f, err := os.Open(path)
	require.NoError(b, err)
	defer f.Close()
	positions := rand.New(rand.NewPCG(1, 2)).Perm(n)
	dst := make([]byte, size)
	b.Run("pread", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := r.SampleInto(positions[i%n], dst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mapped", func(b *testing.B) {
		m, err := syscall.Mmap(int(f.Fd()), 0, len(header)+n*size, syscall.PROT_READ, syscall.MAP_SHARED)
		require.NoError(b, err)
		defer syscall.Munmap(m)
		for i := 0; b.Loop(); i++ {
			at := len(header) + positions[i%n]*size
			copy(dst, m[at:at+size])
		}
	})
	b.Run("syscall", func(b *testing.B) {
		for b.Loop() {
			syscall.Getppid()
		}
	})
}
