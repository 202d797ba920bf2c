package vision

import (
	"bytes"
	"fmt"
	"image"
	_ "image/jpeg" // the formats Apply decodes
	_ "image/png"
	"math"
	"math/rand/v2"

	"github.com/actorfeed/actorfeed/readers/format"
)

// MaxPixels bounds an image's declared size, checked before it is
// decoded: 64 Mpx, 256 MiB as RGBA.
const MaxPixels = 64 << 20

// MaxSize bounds Transform.Size.
const MaxSize = 4096

// ErrImage is matched by errors.Is for an image that does not decode. It
// is damaged data: errors.Is matches format.ErrCorrupt for it too.
var ErrImage error = imageError{}

type imageError struct{}

func (imageError) Error() string        { return "vision: not a decodable image" }
func (imageError) Is(target error) bool { return target == format.ErrCorrupt }

// Crop is how a Transform picks the part of an image it keeps.
type Crop uint8

const (
	// RandomResized is torchvision's RandomResizedCrop: a part of a random
	// area (Scale of the image's) and aspect ratio (Ratio), the central
	// one when ten draws do not fit.
	RandomResized Crop = iota
	// Center is the central square, as large as the image allows.
	Center
	// Whole is the whole image, stretched to a square.
	Whole
)

// Transform decodes an image (JPEG or PNG), crops it (Crop), resizes the
// crop to Size x Size (bilinear, widened when it shrinks), flips it left
// to right half of the time (Flip), and writes it as float32, (v/255 -
// Mean[c]) / Std[c], channel-major (CHW) or, with HWC, channel-minor.
// Every random choice is drawn from (Seed, epoch, sample id): a sample's
// output is the same after a restart or a resume, and differs by epoch.
type Transform struct {
	Size     int
	Crop     Crop
	Scale    [2]float64 // RandomResized's area bounds; default 0.08, 1
	Ratio    [2]float64 // RandomResized's aspect ratio bounds; default 3/4, 4/3
	Flip     bool
	Channels int       // 3 (RGB; gray replicated) or 1 (gray); default 3
	Mean     []float32 // per channel; nil: 0
	Std      []float32 // per channel; nil: 1
	HWC      bool
	Seed     uint64
	Decoder  Decoder
}

// Decoder is what decodes JPEGs. PNGs are the standard library's.
type Decoder uint8

const (
	// AutoDecoder is TurboJPEG where LibTurboJPEG loads, else Go's.
	AutoDecoder Decoder = iota
	// GoDecoder is the standard library's image/jpeg: the same pixels on
	// every machine.
	GoDecoder
	// TurboJPEG is libjpeg-turbo, loaded at run time, which decodes at
	// 1/8 to 8/8 of the size (DCT scaling) where the crop is that much
	// larger than the output: an error where it cannot be loaded.
	TurboDecoder
)

// ImageNet's mean and standard deviation, the usual Normalize of
// torchvision's models.
var (
	ImageNetMean = []float32{0.485, 0.456, 0.406}
	ImageNetStd  = []float32{0.229, 0.224, 0.225}
)

// withDefaults fills what t leaves zero and checks it.
func (t Transform) withDefaults() (Transform, error) {
	if t.Scale == [2]float64{} {
		t.Scale = [2]float64{0.08, 1}
	}
	if t.Ratio == [2]float64{} {
		t.Ratio = [2]float64{3.0 / 4, 4.0 / 3}
	}
	if t.Channels == 0 {
		t.Channels = 3
	}
	switch {
	case t.Size < 1 || t.Size > MaxSize:
		return t, fmt.Errorf("vision: size %d: want 1 to %d", t.Size, MaxSize)
	case t.Channels != 1 && t.Channels != 3:
		return t, fmt.Errorf("vision: channels %d: want 1 or 3", t.Channels)
	case !(t.Scale[0] > 0 && t.Scale[0] <= t.Scale[1] && t.Scale[1] <= 1):
		return t, fmt.Errorf("vision: scale %v: want 0 < low <= high <= 1", t.Scale)
	case !(t.Ratio[0] > 0 && t.Ratio[0] <= t.Ratio[1] && !math.IsInf(t.Ratio[1], 0)):
		return t, fmt.Errorf("vision: ratio %v: want 0 < low <= high", t.Ratio)
	case t.Mean != nil && len(t.Mean) != t.Channels, t.Std != nil && len(t.Std) != t.Channels:
		return t, fmt.Errorf("vision: mean and std: want %d values each", t.Channels)
	}
	for _, s := range t.Std {
		if !(s > 0) {
			return t, fmt.Errorf("vision: std %v: want positive values", t.Std)
		}
	}
	return t, nil
}

// Values is how many float32 values one output image holds.
func (t Transform) Values() int { return t.Channels * t.Size * t.Size }

// rng is the generator of sample id's choices in epoch.
func (t Transform) rng(epoch int, id uint64) *rand.Rand {
	return rand.New(rand.NewPCG(t.Seed^mix(uint64(epoch)+0x9e3779b97f4a7c15), mix(id)))
}

// mix is splitmix64's finalizer: nearby inputs give unrelated outputs.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// scratch is what one goroutine's applies reuse: the decoded image, and
// the resampler's filters and rows.
type scratch struct {
	decoded *image.RGBA
	resampler
}

// apply writes sample id's image, encoded in data, transformed, to out
// (Values long).
func (t Transform) apply(epoch int, id uint64, data []byte, out []float32, sc *scratch) error {
	if t.Decoder != GoDecoder && len(data) > 2 && data[0] == 0xff && data[1] == 0xd8 {
		tj, err := loadTurbo()
		if err == nil {
			return t.applyTurbo(tj, epoch, id, data, out, sc)
		}
		if t.Decoder == TurboDecoder {
			return err
		}
	}
	return t.applyGo(epoch, id, data, out, sc)
}

// applyGo is apply by Go's decoders.
func (t Transform) applyGo(epoch int, id uint64, data []byte, out []float32, sc *scratch) error {
	rgb, err := decodeGo(data, sc.decoded)
	if err != nil {
		return err
	}
	sc.decoded = rgb
	r := t.rng(epoch, id)
	crop := t.crop(rgb.Rect, r)
	c := [4]float64{float64(crop.Min.X), float64(crop.Min.Y), float64(crop.Max.X), float64(crop.Max.Y)}
	sc.resample(rgb, c, t, out, t.Flip && r.IntN(2) == 1)
	return nil
}

// decodeGo decodes data with Go's decoders into an image whose pixels
// hold its colours as Pillow's convert("RGB") makes them, in dst's memory
// when it holds them: a pixel's colour, not premultiplied by its alpha
// (a transparent pixel keeps its colour), CMYK as (255-c)(255-k)/255.
// The result is an *image.RGBA only by its layout: its alpha is unused.
func decodeGo(data []byte, dst *image.RGBA) (*image.RGBA, error) {
	if len(data) > 2 && data[0] == 0xff && data[1] == 0xd8 {
		if err := checkJPEGMarkers(data); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrImage, err)
		}
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrImage, err)
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width*cfg.Height > MaxPixels {
		return nil, fmt.Errorf("%w: %dx%d pixels (at most %d)", ErrImage, cfg.Width, cfg.Height, MaxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrImage, err)
	}
	return asRGB(img, dst), nil
}

// reuse is an RGBA image of bounds b, in img's memory when it holds it.
func reuse(img *image.RGBA, b image.Rectangle) *image.RGBA {
	n := 4 * b.Dx() * b.Dy()
	if img == nil || cap(img.Pix) < n {
		return image.NewRGBA(b)
	}
	return &image.RGBA{Pix: img.Pix[:n], Stride: 4 * b.Dx(), Rect: b}
}

// applyTurbo is apply for a JPEG that TurboJPEG decodes: the crop is drawn
// on the image's full size, as apply draws it, and the image decoded at
// the smallest eighth of its size that keeps the crop at least Size a
// side. A CMYK or YCCK JPEG (Adobe's), which TurboJPEG makes no RGB of,
// is decoded to CMYK and made RGB as Pillow makes it (decodeCMYK).
func (t Transform) applyTurbo(tj *turbo, epoch int, id uint64, data []byte, out []float32, sc *scratch) error {
	w, h, rgb, err := tj.header(data)
	if err != nil {
		return err
	}
	if w < 1 || h < 1 || w*h > MaxPixels {
		return fmt.Errorf("%w: %dx%d pixels (at most %d)", ErrImage, w, h, MaxPixels)
	}
	r := t.rng(epoch, id)
	crop := t.crop(image.Rect(0, 0, w, h), r)
	e := 8
	for e > 1 && scaled(crop.Dx(), e-1) >= t.Size && scaled(crop.Dy(), e-1) >= t.Size {
		e--
	}
	decode := tj.decode
	if !rgb {
		decode = tj.decodeCMYK
	}
	if sc.decoded, err = decode(data, w, h, e, sc.decoded); err != nil {
		return err
	}
	f := float64(e) / 8
	c := [4]float64{float64(crop.Min.X) * f, float64(crop.Min.Y) * f, float64(crop.Max.X) * f, float64(crop.Max.Y) * f}
	sc.resample(sc.decoded, c, t, out, t.Flip && r.IntN(2) == 1)
	return nil
}

// crop is the part of bounds t keeps, drawn from r.
func (t Transform) crop(b image.Rectangle, r *rand.Rand) image.Rectangle {
	w, h := b.Dx(), b.Dy()
	switch t.Crop {
	case Whole:
		return b
	case Center:
		s := min(w, h)
		return image.Rect(0, 0, s, s).Add(b.Min).Add(image.Pt((w-s)/2, (h-s)/2))
	}
	area := float64(w * h)
	logLo, logHi := math.Log(t.Ratio[0]), math.Log(t.Ratio[1])
	for range 10 {
		target := area * (t.Scale[0] + r.Float64()*(t.Scale[1]-t.Scale[0]))
		aspect := math.Exp(logLo + r.Float64()*(logHi-logLo))
		cw := int(math.Round(math.Sqrt(target * aspect)))
		ch := int(math.Round(math.Sqrt(target / aspect)))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			x, y := r.IntN(w-cw+1), r.IntN(h-ch+1)
			return image.Rect(x, y, x+cw, y+ch).Add(b.Min)
		}
	}
	cw, ch := w, h // the central crop within the ratio bounds
	switch in := float64(w) / float64(h); {
	case in < t.Ratio[0]:
		ch = max(1, int(math.Round(float64(w)/t.Ratio[0])))
	case in > t.Ratio[1]:
		cw = max(1, int(math.Round(float64(h)*t.Ratio[1])))
	}
	return image.Rect(0, 0, cw, ch).Add(b.Min).Add(image.Pt((w-cw)/2, (h-ch)/2))
}
