package vision

import (
	"image"
	"math"
)

// A resize from a crop to Size x Size, fused with the normalisation and
// the layout of the output: PIL's two-pass bilinear resampling (a
// triangle filter widened by the factor when it shrinks, so that it
// averages every source pixel rather than sampling four), done in
// float32 straight into the batch: x/image/draw's resize into an image,
// then a pass to normalise it, made and walked an image a sample more
// (docs/images.md).

// taps is one pass's filter: output i reads in[first[i] : first[i]+n[i]]
// with the weights w[i*k : i*k+n[i]].
type taps struct {
	first, n []int
	w        []float32
	k        int
}

// makeTaps is the filter from [lo, hi) of an axis of inSize pixels onto
// out pixels.
func makeTaps(lo, hi float64, inSize, out int, t *taps) {
	scale := (hi - lo) / float64(out)
	filterScale := max(scale, 1)
	support := filterScale // the triangle's support is 1
	k := int(math.Ceil(support))*2 + 1
	t.k = k
	t.first, t.n, t.w = resize(t.first, out), resize(t.n, out), resize(t.w, out*k)
	for i := range out {
		center := lo + (float64(i)+0.5)*scale
		first := max(int(center-support+0.5), 0)
		n := min(int(center+support+0.5), inSize) - first
		n = max(min(n, k), 0)
		var sum float64
		w := t.w[i*k : i*k+k]
		for j := range n {
			x := (float64(first+j) - center + 0.5) / filterScale
			v := max(0, 1-math.Abs(x))
			w[j] = float32(v)
			sum += v
		}
		for j := range n {
			if sum > 0 {
				w[j] /= float32(sum)
			}
		}
		// Taps of weight 0 at either end (an upscale's third) cost a
		// multiply each for nothing.
		for n > 1 && w[n-1] == 0 {
			n--
		}
		for n > 1 && w[0] == 0 {
			copy(w, w[1:n])
			first, n = first+1, n-1
		}
		t.first[i], t.n[i] = first, n
	}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// resampler keeps a goroutine's filters and its intermediate rows.
type resampler struct {
	x, y taps
	rows []float32 // pass one: the rows the second pass reads, laid out as an output row
	line []float32 // a source row in float32, RGB, normalised
}

// resample writes crop (in src's pixels, fractions allowed) of src,
// resized to t.Size a side, normalised and laid out as t says, to out,
// mirrored when flip. Pass one filters each source row the second reads
// across, and writes it already normalised, mirrored and in the output's
// layout; pass two, down, is then a weighted sum of whole rows into the
// output. Each pass's weights sum to 1, so normalising commutes with
// both: a value is normalised as its source pixel is read, not once an
// output value.
func (r *resampler) resample(src *image.RGBA, crop [4]float64, t Transform, out []float32, flip bool) {
	n := t.Size
	b := src.Rect
	makeTaps(crop[0]-float64(b.Min.X), crop[2]-float64(b.Min.X), b.Dx(), n, &r.x)
	makeTaps(crop[1]-float64(b.Min.Y), crop[3]-float64(b.Min.Y), b.Dy(), n, &r.y)
	y0, y1 := r.y.first[0], r.y.first[n-1]+r.y.n[n-1]
	width := t.Channels * n // values in a row
	r.rows = resize(r.rows, max(y1-y0, 0)*width)
	shift, scale := t.normalisation()
	for y := y0; y < y1; y++ {
		r.across(src, y, t, shift, scale, r.rows[(y-y0)*width:(y-y0+1)*width], flip)
	}
	// An output row is one run of width values (HWC, one channel) or
	// three runs of n, one a channel plane (CHW); a row of rows likewise.
	runs, run := 1, width
	if t.Channels == 3 && !t.HWC {
		runs, run = 3, n
	}
	for i := range n {
		first, w := r.y.first[i]-y0, r.y.w[i*r.y.k:i*r.y.k+r.y.n[i]]
		for c := range runs {
			dst := out[c*n*n+i*run : c*n*n+(i+1)*run]
			row := func(j int) []float32 {
				at := (first+j)*width + c*run
				return r.rows[at : at+len(dst)]
			}
			switch len(w) { // two taps and three, as across
			case 2:
				a, b, w0, w1 := row(0), row(1), w[0], w[1]
				for k := range dst {
					dst[k] = a[k]*w0 + b[k]*w1
				}
				continue
			case 3:
				a, b, d, w0, w1, w2 := row(0), row(1), row(2), w[0], w[1], w[2]
				for k := range dst {
					dst[k] = a[k]*w0 + b[k]*w1 + d[k]*w2
				}
				continue
			}
			a, w0 := row(0), w[0]
			for k := range dst {
				dst[k] = a[k] * w0
			}
			for j := 1; j < len(w); j++ {
				a, wj := row(j), w[j]
				for k := range dst {
					dst[k] += a[k] * wj
				}
			}
		}
	}
	clampPixels(out[:n*n*t.Channels], t, shift, scale)
}

// clampPixels keeps every value between what a pixel's 0 and 255
// normalise to, as Pillow's resampling and conversion to luma do, which
// round into bytes: weights that sum to 1 only to within float32's
// rounding (the luma's three too) put a white pixel at 1.0000002.
func clampPixels(out []float32, t Transform, shift, scale [3]float32) {
	var lo, hi [3]float32
	for c := range 3 {
		lo[c], hi[c] = -shift[c], 255*scale[c]-shift[c]
	}
	switch {
	case t.Channels == 3 && t.HWC:
		for i := 0; i+3 <= len(out); i += 3 {
			for c := range 3 {
				out[i+c] = min(max(out[i+c], lo[c]), hi[c])
			}
		}
	default: // one channel, or three planes
		plane := t.Size * t.Size
		for c := range t.Channels {
			for i, v := range out[c*plane : (c+1)*plane] {
				out[c*plane+i] = min(max(v, lo[c]), hi[c])
			}
		}
	}
}

// across filters source row y across into row: each output column's
// value, normalised by shift and scale, at its place (mirrored when flip)
// in a row laid out as t's output is.
func (r *resampler) across(src *image.RGBA, y int, t Transform, shift, scale [3]float32, row []float32, flip bool) {
	n := t.Size
	x0, x1 := r.x.first[0], r.x.first[n-1]+r.x.n[n-1]
	pix := src.Pix[y*src.Stride+4*x0 : y*src.Stride+4*x1]
	// Three channels are normalised as the line is read, once a source
	// pixel: the weights across sum to 1 too. Luma is of the values as
	// they are, normalised after.
	ls, lh := scale, shift
	if t.Channels == 1 {
		ls, lh = [3]float32{1, 1, 1}, [3]float32{}
	}
	r.line = resize(r.line, max(x1-x0, 0)*3)
	line := r.line
	for i := range x1 - x0 {
		p := pix[4*i : 4*i+3 : 4*i+3]
		line[3*i], line[3*i+1], line[3*i+2] = float32(p[0])*ls[0]-lh[0], float32(p[1])*ls[1]-lh[1], float32(p[2])*ls[2]-lh[2]
	}
	x, step := 0, 1
	if flip {
		x, step = n-1, -1
	}
	first, taps, k := r.x.first[:n], r.x.n[:n], r.x.k
	for i := 0; i < n; i, x = i+1, x+step {
		at := 3 * (first[i] - x0)
		var cr, cg, cb float32
		switch taps[i] {
		case 2: // every upscale's, unrolled
			w0, w1 := r.x.w[i*k], r.x.w[i*k+1]
			v := line[at : at+6 : at+6]
			cr, cg, cb = v[0]*w0+v[3]*w1, v[1]*w0+v[4]*w1, v[2]*w0+v[5]*w1
		case 3: // most shrinks': scaled to e/8, a crop's shorter side is under e/(e-1) of the size
			w0, w1, w2 := r.x.w[i*k], r.x.w[i*k+1], r.x.w[i*k+2]
			v := line[at : at+9 : at+9]
			cr = v[0]*w0 + v[3]*w1 + v[6]*w2
			cg = v[1]*w0 + v[4]*w1 + v[7]*w2
			cb = v[2]*w0 + v[5]*w1 + v[8]*w2
		default:
			w := r.x.w[i*k : i*k+taps[i]]
			v := line[at : at+3*len(w)]
			for j, wj := range w {
				cr += v[3*j] * wj
				cg += v[3*j+1] * wj
				cb += v[3*j+2] * wj
			}
		}
		switch {
		case t.Channels == 1: // ITU-R 601 luma, as PIL's convert("L")
			row[x] = (0.299*cr+0.587*cg+0.114*cb)*scale[0] - shift[0]
		case t.HWC:
			o := row[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = cr, cg, cb
		default:
			row[x], row[n+x], row[2*n+x] = cr, cg, cb
		}
	}
}

// normalisation is each channel's v*scale - shift: (v/255 - mean) / std
// folded.
func (t Transform) normalisation() (shift, scale [3]float32) {
	for k := range t.Channels {
		shift[k], scale[k] = 0, 1.0/255
		if t.Mean != nil {
			shift[k] = t.Mean[k]
		}
		if t.Std != nil {
			scale[k] /= t.Std[k]
			shift[k] /= t.Std[k]
		}
	}
	return shift, scale
}
