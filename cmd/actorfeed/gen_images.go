package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// maxImageSize bounds gen --image-size.
const maxImageSize = 4096

// imageSet is gen's set of JPEG images: samples images of about size
// pixels a side, in files shards of format ("wds" or "tfrecord").
type imageSet struct {
	files, samples, size int
	seed                 uint64
	format               string
}

// write writes the shards into dir, shard f holding the samples f, f +
// files, ...: each appears whole or not at all. The shards are encoded
// side by side, a goroutine a shard, at most GOMAXPROCS at once.
func (s imageSet) write(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sf := shardFormats[s.format]
	errs := make([]error, s.files)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for f := range s.files {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[f] = s.shard(ctx, sf, f, filepath.Join(dir, fmt.Sprintf("shard-%06d%s", f, sf.suffix)))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// shard writes shard f.
func (s imageSet) shard(ctx context.Context, sf shardFormat, f int, path string) error {
	w := sf.new()
	if t, ok := w.(*tarShard); ok {
		t.ext = ".jpg"
	}
	var buf bytes.Buffer
	for i := f; i < s.samples; i += s.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		img, class := s.image(i)
		buf.Reset()
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
			return err
		}
		// The shard copies the image into its own buffer: buf is free again.
		if err := w.add(i, buf.Bytes(), int64(class), true); err != nil {
			return err
		}
	}
	return w.write(path)
}

// image is sample i and its class: a size between 3/4 and 5/4 of the
// set's a side, the class's colour and stripes (their direction and
// spacing), and noise, all drawn from (seed, i).
func (s imageSet) image(i int) (*image.YCbCr, int) {
	r := rand.New(rand.NewPCG(s.seed, uint64(i)))
	class := r.IntN(classes)
	w := s.size*3/4 + r.IntN(s.size/2+1)
	h := s.size*3/4 + r.IntN(s.size/2+1)
	img := image.NewYCbCr(image.Rect(0, 0, max(w, 1), max(h, 1)), image.YCbCrSubsampleRatio420)
	hue := color.RGBA{uint8(40 + 20*class), uint8(230 - 20*class), uint8(90 + 15*(class%5)), 255}
	cy, cb, cr := color.RGBToYCbCr(hue.R, hue.G, hue.B)
	period := 6 + 3*class
	for y := range img.Rect.Dy() {
		for x := range img.Rect.Dx() {
			v := int(cy)
			if ((x+class*y/4)/period)%2 == 0 {
				v -= 60
			}
			v += r.IntN(31) - 15
			img.Y[img.YOffset(x, y)] = uint8(min(max(v, 0), 255))
		}
	}
	for k := range img.Cb {
		img.Cb[k], img.Cr[k] = cb, cr
	}
	return img, class
}
