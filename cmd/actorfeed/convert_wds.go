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
	"github.com/actorfeed/actorfeed/tensor"
)

// maxShardSamples bounds --shard-samples: a shard is written from memory
// one sample at a time, but a shard of more samples than this is no shard.
const maxShardSamples = 1 << 24

// convertWDS writes every sample of the IDX images file at path as
// WebDataset shards in the directory out, shard shard-NNNNNN.tar holding
// perShard samples: sample i as NNNNNNNN.png (the image, 8-bit gray) and,
// with labels beside the images, NNNNNNNN.cls (its class). Each shard
// appears complete or not at all; a failed conversion leaves the shards
// before the one it failed in.
func convertWDS(ctx context.Context, path, out string, perShard int) (samples, shards int, err error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, 0, err
	}
	r, err := readers.Open("idx:"+path, readers.OpenOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	var shard shardWriter
	for s, err := range readers.All(ctx, r) {
		if err != nil {
			return samples, shards, err
		}
		if err := shard.add(samples, s); err != nil {
			return samples, shards, fmt.Errorf("%s: sample %d: %w", path, samples, err)
		}
		samples++
		if samples%perShard == 0 {
			if err := shard.write(filepath.Join(out, fmt.Sprintf("shard-%06d.tar", shards))); err != nil {
				return samples, shards, err
			}
			shards++
		}
	}
	if samples%perShard != 0 {
		if err := shard.write(filepath.Join(out, fmt.Sprintf("shard-%06d.tar", shards))); err != nil {
			return samples, shards, err
		}
		shards++
	}
	return samples, shards, nil
}

// shardWriter gathers a shard's tar in memory.
type shardWriter struct {
	buf bytes.Buffer
	tw  *tar.Writer
	png png.Encoder
}

// pngBuffers keeps the encoder's buffers from image to image: a new
// deflate state for every 784-byte image was most of the conversion.
type pngBuffers struct{ b *png.EncoderBuffer }

func (p *pngBuffers) Get() *png.EncoderBuffer  { return p.b }
func (p *pngBuffers) Put(b *png.EncoderBuffer) { p.b = b }

// add appends sample i, (image) or (image, label), as its members.
func (w *shardWriter) add(i int, s tensor.Slots) error {
	if w.tw == nil {
		w.buf.Reset()
		w.tw = tar.NewWriter(&w.buf)
	}
	if w.png.BufferPool == nil {
		w.png.BufferPool = &pngBuffers{}
	}
	img, err := grayPNG(&w.png, s[0].Tensor)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%08d", i)
	if err := w.member(key+".png", img); err != nil {
		return err
	}
	if len(s) < 2 {
		return nil
	}
	label, err := widen(s[1].Tensor)
	if err != nil {
		return fmt.Errorf("%w: labels are class numbers", err)
	}
	v, err := tensor.View[int64](label)
	if err != nil || len(v) != 1 {
		return fmt.Errorf("a label of shape %v, want one class number", s[1].Shape())
	}
	return w.member(key+".cls", strconv.AppendInt(nil, v[0], 10))
}

// member writes one read-only member, as the webdataset library does.
func (w *shardWriter) member(name string, data []byte) error {
	if err := w.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		return err
	}
	_, err := w.tw.Write(data)
	return err
}

// write ends the shard and writes it to path, atomically.
func (w *shardWriter) write(path string) error {
	if err := w.tw.Close(); err != nil {
		return err
	}
	w.tw = nil
	return atomicfile.Write(path, func(f io.Writer) error {
		_, err := f.Write(w.buf.Bytes())
		return err
	})
}

// grayPNG encodes a uint8 image of shape [1, H, W] as an 8-bit gray PNG.
func grayPNG(enc *png.Encoder, t tensor.Tensor) ([]byte, error) {
	sh := t.Shape()
	if t.DType() != tensor.Uint8 || len(sh) != 3 || sh[0] != 1 {
		return nil, fmt.Errorf("an image of %v %v: WebDataset shards hold uint8 images of [1, height, width]", t.DType(), sh)
	}
	img := &image.Gray{Pix: t.Bytes(), Stride: sh[2], Rect: image.Rect(0, 0, sh[2], sh[1])}
	var b bytes.Buffer
	if err := enc.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
