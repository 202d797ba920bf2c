package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/actorfeed/actorfeed/internal/atomicfile"

	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// synthetic describes a generated data set of Fashion-MNIST-shaped samples:
// a [1,28,28] uint8 image and a [1] int64 label in 0..9. Each class has a
// prototype image; a sample is its class's prototype plus noise, so a
// linear classifier can learn the set. Everything derives from the seed and
// the sample's position, so a data set is the same bytes on every machine,
// and sample ids (<file base name>#<record index>) are stable.
type synthetic struct {
	files, samples int
	seed           uint64
	compressor     recordio.Compressor
	first          int // index of the first sample: a held-out set starts past the training set
	// image is the image's size in bytes when it is not Fashion-MNIST's
	// 784: the image is then a [1,image] vector (bench --sizes).
	image int
	// idx writes IDX pairs, as Fashion-MNIST's files are, in place of
	// RecordIO files: records of a fixed size, read by position.
	idx bool
}

const (
	imageSide = 28
	classes   = 10
)

// fileName is the base name of file f of a data set.
func fileName(f int) string { return fmt.Sprintf("part-%05d.recordio", f) }

// idxNames are the base names of file f's IDX pair: its images, and its
// labels, named as MNIST's so that a reader pairs them.
func idxNames(f int) (images, labels string) {
	return fmt.Sprintf("part-%05d-images-idx3-ubyte", f), fmt.Sprintf("part-%05d-labels-idx1-ubyte", f)
}

// write writes the data set to dir (created if missing) and returns the
// paths of its files. File f holds samples/files records, the first
// samples%files files one more.
// A stop through ctx ends the writing at once; the file being written is
// not left behind.
func (s synthetic) write(ctx context.Context, dir string) ([]string, error) {
	if s.files < 1 || s.samples < s.files {
		return nil, fmt.Errorf("need at least 1 file and at least one sample per file, got %d files for %d samples", s.files, s.samples)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	protos := s.prototypes()
	paths := make([]string, s.files)
	first := s.first
	for f := range s.files {
		n := s.samples / s.files
		if f < s.samples%s.files {
			n++
		}
		paths[f] = filepath.Join(dir, fileName(f))
		write := s.writeFile
		if s.idx {
			images, _ := idxNames(f)
			paths[f], write = filepath.Join(dir, images), s.writeIDX
		}
		if err := write(ctx, paths[f], protos, first, n); err != nil {
			return nil, err
		}
		first += n
	}
	return paths, nil
}

// pixels is the image's size in bytes.
func (s synthetic) pixels() int { return cmp.Or(s.image, imageSide*imageSide) }

// shape is the image's shape.
func (s synthetic) shape() tensor.Shape {
	if s.pixels() == imageSide*imageSide {
		return tensor.Shape{1, imageSide, imageSide}
	}
	return tensor.Shape{1, s.pixels()}
}

func (s synthetic) prototypes() [classes][]uint8 {
	var protos [classes][]uint8
	rng := rand.New(rand.NewPCG(s.seed, 1<<63))
	for c := range protos {
		protos[c] = make([]uint8, s.pixels())
		for k := range protos[c] {
			protos[c][k] = uint8(rng.IntN(256))
		}
	}
	return protos
}

// writeFile writes samples first..first+n-1 of the set.
func (s synthetic) writeFile(ctx context.Context, path string, protos [classes][]uint8, first, n int) error {
	img := make([]uint8, s.pixels()) // each sample is encoded before the next is made
	shape := s.shape()
	_, err := readers.WriteRecordFile(path, recordio.WriterOptions{Compressor: s.compressor}, readers.Samples(n, func(i int) (tensor.Slots, error) {
		if err := context.Cause(ctx); err != nil {
			return nil, err
		}
		label := s.sample(protos, img, first+i)
		return tensor.Slots{
			{Tensor: tensor.MustFromSlice(shape, img)},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{int64(label)})},
		}, nil
	}))
	return err
}

// sample makes sample i of the set in img, and returns its label.
func (s synthetic) sample(protos [classes][]uint8, img []uint8, i int) int {
	rng := rand.New(rand.NewPCG(s.seed, uint64(i)))
	label := rng.IntN(classes)
	if s.image == 0 {
		for k, p := range protos[label] {
			img[k] = uint8((int(p)*3 + rng.IntN(256)) / 4)
		}
	} else {
		noisy(img, protos[label], rng)
	}
	return label
}

// writeIDX writes samples first..first+n-1 of the set as an IDX pair:
// images at path, their labels (uint8) beside it. Each file appears whole
// or not at all.
func (s synthetic) writeIDX(ctx context.Context, path string, protos [classes][]uint8, first, n int) error {
	dims := append([]int{n}, s.shape()[1:]...)
	if len(dims) == 2 && s.pixels() == imageSide*imageSide {
		dims = []int{n, imageSide, imageSide}
	}
	labels := make([]byte, 0, n)
	err := atomicfile.Write(path, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		if _, err := bw.Write(idxHeader(dims)); err != nil {
			return err
		}
		img := make([]uint8, s.pixels())
		for i := range n {
			if err := context.Cause(ctx); err != nil {
				return err
			}
			labels = append(labels, byte(s.sample(protos, img, first+i)))
			if _, err := bw.Write(img); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	return atomicfile.Write(strings.Replace(path, "images-idx3", "labels-idx1", 1), func(w io.Writer) error {
		_, err := w.Write(append(idxHeader([]int{n}), labels...))
		return err
	})
}

// idxHeader is the header of an IDX file of uint8 data of dims.
func idxHeader(dims []int) []byte {
	h := []byte{0, 0, 0x08, byte(len(dims))}
	for _, d := range dims {
		h = binary.BigEndian.AppendUint32(h, uint32(d))
	}
	return h
}

// noisy makes img its prototype plus noise, as a Fashion-MNIST-shaped
// sample's, drawing eight noise bytes at a time: large images are written
// at memory speed rather than one random draw a byte.
func noisy(img, proto []uint8, rng *rand.Rand) {
	var bits uint64
	for k, p := range proto {
		if k%8 == 0 {
			bits = rng.Uint64()
		}
		img[k] = uint8((int(p)*3 + int(bits&0xff)) / 4)
		bits >>= 8
	}
}
