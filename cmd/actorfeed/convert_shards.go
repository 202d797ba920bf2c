package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/tensor"
)

// maxShardSamples bounds --shard-samples: a shard is written from memory
// one sample at a time, but a shard of more samples than this is no shard.
const maxShardSamples = 1 << 24

// shardFormat is what convert writes shards of: their suffix and how a
// shard gathers its samples.
type shardFormat struct {
	suffix string
	new    func() shardWriter
}

var shardFormats = map[string]shardFormat{
	"wds":      {".tar", func() shardWriter { return &tarShard{ext: ".png"} }},
	"tfrecord": {".tfrecord", func() shardWriter { return &tfrecordShard{} }},
}

// shardWriter gathers a shard in memory, a sample at a time.
type shardWriter interface {
	// add appends sample i: its encoded image, and its label when it has one.
	add(i int, png []byte, label int64, labelled bool) error
	// write ends the shard and writes it to path, atomically.
	write(path string) error
}

// convertShards writes every sample of the IDX images file at path as
// shards in the directory out, shard-NNNNNN<suffix> holding perShard
// samples: sample i's image as an 8-bit gray PNG and, with labels beside
// the images, its class. Each shard appears complete or not at all; a
// failed conversion leaves the shards before the one it failed in.
func convertShards(ctx context.Context, path, out string, perShard int, sf shardFormat) (samples, shards int, err error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, 0, err
	}
	r, err := readers.Open("idx:"+path, readers.OpenOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	shard := sf.new()
	var enc png.Encoder
	enc.BufferPool = &pngBuffers{}
	flush := func() error {
		err := shard.write(filepath.Join(out, fmt.Sprintf("shard-%06d%s", shards, sf.suffix)))
		if err == nil {
			shards++
		}
		return err
	}
	for s, err := range readers.All(ctx, r) {
		if err != nil {
			return samples, shards, err
		}
		if err := addSample(shard, &enc, samples, s); err != nil {
			return samples, shards, fmt.Errorf("%s: sample %d: %w", path, samples, err)
		}
		if samples++; samples%perShard == 0 {
			if err := flush(); err != nil {
				return samples, shards, err
			}
		}
	}
	if samples%perShard != 0 {
		if err := flush(); err != nil {
			return samples, shards, err
		}
	}
	return samples, shards, nil
}

// pngBuffers keeps the encoder's buffers from image to image: a new
// deflate state for every 784-byte image was most of the conversion.
type pngBuffers struct{ b *png.EncoderBuffer }

func (p *pngBuffers) Get() *png.EncoderBuffer  { return p.b }
func (p *pngBuffers) Put(b *png.EncoderBuffer) { p.b = b }

// addSample adds sample i, (image) or (image, label), to the shard.
func addSample(w shardWriter, enc *png.Encoder, i int, s tensor.Slots) error {
	img, err := grayPNG(enc, s[0].Tensor)
	if err != nil {
		return err
	}
	if len(s) < 2 {
		return w.add(i, img, 0, false)
	}
	label, err := widen(s[1].Tensor)
	if err != nil {
		return fmt.Errorf("%w: labels are class numbers", err)
	}
	v, err := tensor.View[int64](label)
	if err != nil || len(v) != 1 {
		return fmt.Errorf("a label of shape %v, want one class number", s[1].Shape())
	}
	return w.add(i, img, v[0], true)
}

// tarShard is a WebDataset shard: sample i as NNNNNNNN<ext> (the image)
// and NNNNNNNN.cls.
type tarShard struct {
	ext string
	buf bytes.Buffer
	tw  *tar.Writer
}

func (w *tarShard) add(i int, img []byte, label int64, labelled bool) error {
	if w.tw == nil {
		w.buf.Reset()
		w.tw = tar.NewWriter(&w.buf)
	}
	key := fmt.Sprintf("%08d", i)
	if err := w.member(key+w.ext, img); err != nil || !labelled {
		return err
	}
	return w.member(key+".cls", strconv.AppendInt(nil, label, 10))
}

// member writes one read-only member, as the webdataset library does.
func (w *tarShard) member(name string, data []byte) error {
	if err := w.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		return err
	}
	_, err := w.tw.Write(data)
	return err
}

func (w *tarShard) write(path string) error {
	if err := w.tw.Close(); err != nil {
		return err
	}
	w.tw = nil
	return writeAll(path, w.buf.Bytes())
}

// tfrecordShard is a TFRecord file of tf.train.Example records, as
// TensorFlow Datasets writes Fashion-MNIST: image (PNG bytes) and label
// (int64).
type tfrecordShard struct {
	buf bytes.Buffer
	w   *tfrecord.Writer
}

func (w *tfrecordShard) add(_ int, img []byte, label int64, labelled bool) error {
	if w.w == nil {
		w.buf.Reset()
		w.w = tfrecord.NewWriter(&w.buf)
	}
	var x tfrecord.Example
	x.Bytes("image", img)
	if labelled {
		x.Int64("label", label)
	}
	return w.w.Write(x.Marshal())
}

func (w *tfrecordShard) write(path string) error {
	w.w = nil
	return writeAll(path, w.buf.Bytes())
}

// writeAll writes data to path, atomically.
func writeAll(path string, data []byte) error {
	return atomicfile.Write(path, func(f io.Writer) error {
		_, err := f.Write(data)
		return err
	})
}

// grayPNG encodes a uint8 image of shape [1, H, W] as an 8-bit gray PNG.
func grayPNG(enc *png.Encoder, t tensor.Tensor) ([]byte, error) {
	sh := t.Shape()
	if t.DType() != tensor.Uint8 || len(sh) != 3 || sh[0] != 1 {
		return nil, fmt.Errorf("an image of %v %v: shards hold uint8 images of [1, height, width]", t.DType(), sh)
	}
	img := &image.Gray{Pix: t.Bytes(), Stride: sh[2], Rect: image.Rect(0, 0, sh[2], sh[1])}
	var b bytes.Buffer
	if err := enc.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
