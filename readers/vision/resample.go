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
	rows []float32 // pass one: the rows the second pass reads, Size RGB values each
	line []float32 // a source row in float32, RGB
	acc  []float32 // pass two: one output row, RGB
}

// resample writes crop (in src's pixels, fractions allowed) of src,
// resized to t.Size a side, normalised and laid out as t says, to out,
// mirrored when flip.
func (r *resampler) resample(src *image.RGBA, crop [4]float64, t Transform, out []float32, flip bool) {
	n := t.Size
	b := src.Rect
	makeTaps(crop[0]-float64(b.Min.X), crop[2]-float64(b.Min.X), b.Dx(), n, &r.x)
	makeTaps(crop[1]-float64(b.Min.Y), crop[3]-float64(b.Min.Y), b.Dy(), n, &r.y)
	x0, x1 := r.x.first[0], r.x.first[n-1]+r.x.n[n-1]
	y0, y1 := r.y.first[0], r.y.first[n-1]+r.y.n[n-1]
	r.rows = resize(r.rows, max(y1-y0, 0)*n*3)
	r.line = resize(r.line, max(x1-x0, 0)*3)
	for y := y0; y < y1; y++ { // pass one: across, every source row the second pass reads
		pix := src.Pix[y*src.Stride+4*x0 : y*src.Stride+4*x1]
		line := r.line
		for i := range x1 - x0 {
			p := pix[4*i : 4*i+3 : 4*i+3]
			line[3*i], line[3*i+1], line[3*i+2] = float32(p[0]), float32(p[1]), float32(p[2])
		}
		row := r.rows[(y-y0)*n*3 : (y-y0+1)*n*3]
		for i := range n {
			at := 3 * (r.x.first[i] - x0)
			w := r.x.w[i*r.x.k : i*r.x.k+r.x.n[i]]
			o := row[3*i : 3*i+3 : 3*i+3]
			if len(w) == 2 { // every upscale's: two taps, unrolled
				v := line[at : at+6 : at+6]
				o[0], o[1], o[2] = v[0]*w[0]+v[3]*w[1], v[1]*w[0]+v[4]*w[1], v[2]*w[0]+v[5]*w[1]
				continue
			}
			var cr, cg, cb float32
			v := line[at : at+3*len(w)]
			for j, wj := range w {
				cr += v[3*j] * wj
				cg += v[3*j+1] * wj
				cb += v[3*j+2] * wj
			}
			o[0], o[1], o[2] = cr, cg, cb
		}
	}
	shift, scale := t.normalisation()
	r.acc = resize(r.acc, n*3)
	for i := range n { // pass two: down, a whole row at a time
		acc := r.acc
		first, w := r.y.first[i]-y0, r.y.w[i*r.y.k:i*r.y.k+r.y.n[i]]
		if len(w) == 2 { // every upscale's: two taps, one loop
			a, b := r.rows[first*n*3:(first+1)*n*3], r.rows[(first+1)*n*3:(first+2)*n*3]
			a, b = a[:len(acc)], b[:len(acc)]
			for k := range acc {
				acc[k] = a[k]*w[0] + b[k]*w[1]
			}
			t.putRow(out, i, acc, flip, shift, scale)
			continue
		}
		clear(acc)
		for j, wj := range w {
			row := r.rows[(first+j)*n*3 : (first+j+1)*n*3]
			row = row[:len(acc)]
			for k, v := range row {
				acc[k] += v * wj
			}
		}
		t.putRow(out, i, acc, flip, shift, scale)
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

// putRow writes output row y from its RGB values (0-255), mirrored when
// flip.
func (t Transform) putRow(out []float32, y int, rgb []float32, flip bool, shift, scale [3]float32) {
	n := t.Size
	x, step := 0, 1
	if flip {
		x, step = n-1, -1
	}
	switch {
	case t.Channels == 1: // ITU-R 601 luma, as PIL's convert("L")
		o := out[y*n : (y+1)*n]
		for i := 0; i < n; i, x = i+1, x+step {
			p := rgb[3*i : 3*i+3 : 3*i+3]
			o[x] = (0.299*p[0]+0.587*p[1]+0.114*p[2])*scale[0] - shift[0]
		}
	case t.HWC:
		o := out[y*n*3 : (y+1)*n*3]
		for i := 0; i < n; i, x = i+1, x+step {
			p, q := rgb[3*i:3*i+3:3*i+3], o[3*x:3*x+3:3*x+3]
			q[0], q[1], q[2] = p[0]*scale[0]-shift[0], p[1]*scale[1]-shift[1], p[2]*scale[2]-shift[2]
		}
	default:
		r, g, b := out[y*n:(y+1)*n], out[n*n+y*n:n*n+(y+1)*n], out[2*n*n+y*n:2*n*n+(y+1)*n]
		for i := 0; i < n; i, x = i+1, x+step {
			p := rgb[3*i : 3*i+3 : 3*i+3]
			r[x], g[x], b[x] = p[0]*scale[0]-shift[0], p[1]*scale[1]-shift[1], p[2]*scale[2]-shift[2]
		}
	}
}
