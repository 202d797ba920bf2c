package vision

import (
	"image"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The two passes give what resizing each output pixel on its own gives:
// the weighted sum, in float64, of the source pixels under both axes'
// triangle filters (PIL's bilinear, widened when it shrinks), then
// normalised, laid out and mirrored. Crops of every kind: shrunk (many
// taps), grown (two), at fractions of a pixel, against every layout.
func TestResampleIsTheFilterOfEachPixel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var r resampler // one for all: its buffers carry from one image to the next
	for range 300 {
		w, h := 1+rng.IntN(90), 1+rng.IntN(90)
		src := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := range src.Pix {
			src.Pix[i] = uint8(rng.IntN(256))
		}
		tr := Transform{Size: 1 + rng.IntN(60), Channels: 3, HWC: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			tr.Channels = 1
		}
		if rng.IntN(2) == 0 {
			tr.Mean, tr.Std = []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}
		}
		x0, y0 := rng.Float64()*float64(w), rng.Float64()*float64(h)
		crop := [4]float64{x0, y0, x0 + (float64(w)-x0)*(0.05+0.95*rng.Float64()), y0 + (float64(h)-y0)*(0.05+0.95*rng.Float64())}
		flip := rng.IntN(2) == 0
		got := make([]float32, tr.Size*tr.Size*tr.Channels)
		r.resample(src, crop, tr, got, flip)
		want := resampleEachPixel(src, crop, tr, flip)
		for i := range want {
			require.InDelta(t, want[i], got[i], 1e-4, "value %d of %+v, crop %v of %dx%d, flip %v", i, tr, crop, w, h, flip)
		}
	}
}

// resampleEachPixel is the resize of resample computed pixel by pixel.
func resampleEachPixel(src *image.RGBA, crop [4]float64, t Transform, flip bool) []float32 {
	n := t.Size
	wx := triangle(crop[0], crop[2], src.Rect.Dx(), n)
	wy := triangle(crop[1], crop[3], src.Rect.Dy(), n)
	out := make([]float32, n*n*t.Channels)
	for oy := range n {
		for ox := range n {
			var rgb [3]float64
			for y, fy := range wy[oy] {
				if fy == 0 {
					continue
				}
				for x, fx := range wx[ox] {
					for c := range 3 {
						rgb[c] += fy * fx * float64(src.Pix[y*src.Stride+4*x+c])
					}
				}
			}
			vals := rgb[:]
			if t.Channels == 1 {
				vals = []float64{0.299*rgb[0] + 0.587*rgb[1] + 0.114*rgb[2]}
			}
			x := ox
			if flip {
				x = n - 1 - ox
			}
			for c, v := range vals {
				v /= 255
				if t.Mean != nil {
					v = (v - float64(t.Mean[c])) / float64(t.Std[c])
				}
				at := c*n*n + oy*n + x
				if t.HWC {
					at = (oy*n+x)*t.Channels + c
				}
				out[at] = float32(v)
			}
		}
	}
	return out
}

// triangle is each output pixel's weight of every source pixel along an
// axis of size pixels, [lo, hi) onto n: a triangle of support 1 a source
// pixel, widened by the factor when it shrinks, its weights summing to 1.
func triangle(lo, hi float64, size, n int) [][]float64 {
	scale := (hi - lo) / float64(n)
	support := max(scale, 1)
	out := make([][]float64, n)
	for i := range out {
		center := lo + (float64(i)+0.5)*scale
		out[i] = make([]float64, size)
		var sum float64
		for j := range size {
			if float64(j)+0.5 < center-support || float64(j)+0.5 >= center+support {
				continue
			}
			v := max(0, 1-math.Abs((float64(j)+0.5-center)/support))
			out[i][j] = v
			sum += v
		}
		for j := range out[i] {
			out[i][j] /= sum
		}
	}
	return out
}
