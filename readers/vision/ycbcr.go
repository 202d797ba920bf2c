package vision

import "image"

// ycbcrToRGB writes img's pixels to dst as libjpeg makes them (so Pillow
// and libjpeg-turbo): chroma subsampled 2:1 across, down or both is
// upsampled by libjpeg's "fancy" triangle filter (jdsample.c), 3/4 of the
// nearer sample and 1/4 of the further in each direction subsampled, with
// its rounding, the edges' samples repeated; other subsamplings, and
// planes of 2 samples across or fewer, repeat each chroma sample, as
// libjpeg's plain upsampling does. Then YCbCr goes to RGB by libjpeg's
// 16-bit fixed-point tables (jdcolor.c).
func ycbcrToRGB(img *image.YCbCr, dst *image.RGBA) {
	b := img.Rect
	w, h := b.Dx(), b.Dy()
	cw, ch := chromaSize(img.SubsampleRatio, w, h)
	r := img.SubsampleRatio
	if cw <= 2 && (r == image.YCbCrSubsampleRatio422 || r == image.YCbCrSubsampleRatio420) {
		// libjpeg upsamples a plane of 2 samples across or fewer plainly
		// (jinit_upsampler: fancy only where downsampled_width > 2).
		r = plain
	}
	rows := make([]byte, 2*(2*cw+w)) // one upsampled row of each plane, with room for fancyAcross's
	cb, cr := rows[:2*cw+w], rows[2*cw+w:]
	for y := range h {
		upsampleRow(img.Cb, img.CStride, cw, ch, w, h, y, r, cb)
		upsampleRow(img.Cr, img.CStride, cw, ch, w, h, y, r, cr)
		for x := range w {
			yy := int(img.Y[y*img.YStride+x])
			cbv, crv := int(cb[x])-128, int(cr[x])-128
			q := dst.Pix[y*dst.Stride+4*x : y*dst.Stride+4*x+4 : y*dst.Stride+4*x+4]
			q[0] = clamp8(yy + (crR*crv+half)>>scaleBits)
			q[1] = clamp8(yy + (cbG*cbv+crG*crv+half)>>scaleBits)
			q[2] = clamp8(yy + (cbB*cbv+half)>>scaleBits)
			q[3] = 255
		}
	}
}

// libjpeg's conversion constants: FIX(x) = x * 2^16, rounded.
const (
	scaleBits = 16
	half      = 1 << (scaleBits - 1)
	crR       = 91881  // FIX(1.40200)
	cbB       = 116130 // FIX(1.77200)
	cbG       = -22554 // -FIX(0.34414)
	crG       = -46802 // -FIX(0.71414)
)

func clamp8(v int) uint8 {
	return uint8(min(max(v, 0), 255))
}

// chromaSize is the chroma planes' size of a w x h image: what libjpeg
// calls the components' downsampled size, rounded up.
func chromaSize(r image.YCbCrSubsampleRatio, w, h int) (int, int) {
	switch r {
	case image.YCbCrSubsampleRatio422:
		return (w + 1) / 2, h
	case image.YCbCrSubsampleRatio420:
		return (w + 1) / 2, (h + 1) / 2
	case image.YCbCrSubsampleRatio440:
		return w, (h + 1) / 2
	case image.YCbCrSubsampleRatio411:
		return (w + 3) / 4, h
	case image.YCbCrSubsampleRatio410:
		return (w + 3) / 4, (h + 1) / 2
	}
	return w, h
}

// upsampleRow writes row y of a chroma plane (cw x ch samples, stride s)
// at the image's w x h to out (at least 2*cw long), by r's upsampling.
func upsampleRow(p []byte, s, cw, ch, w, h, y int, r image.YCbCrSubsampleRatio, out []byte) {
	switch r {
	case image.YCbCrSubsampleRatio444:
		copy(out[:w], p[y*s:])
	case image.YCbCrSubsampleRatio422:
		fancyAcross(p[y*s:y*s+cw], out[:2*cw])
	case image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio440:
		near := y / 2
		far := near - 1 // the output row is the near row's upper half
		if y%2 == 1 {
			far = near + 1
		}
		far = min(max(far, 0), ch-1) // the edges' rows repeated
		fancyBoth(p[near*s:near*s+cw], p[far*s:far*s+cw], out, r == image.YCbCrSubsampleRatio420, y%2 == 1)
	default: // each sample repeated
		fx, fy := (w+cw-1)/cw, (h+ch-1)/ch
		row := p[min(y/fy, ch-1)*s:]
		for x := range w {
			out[x] = row[min(x/fx, cw-1)]
		}
	}
}

// plain marks a plane that upsample repeats sample by sample.
const plain = image.YCbCrSubsampleRatio(-1)

// fancyAcross is libjpeg's h2v1 fancy upsampling of one row: each sample
// becomes two, 3/4 of it and 1/4 of its left or right neighbour, rounded
// alternately down and up.
func fancyAcross(in, out []byte) {
	n := len(in)
	if n == 1 {
		out[0], out[1] = in[0], in[0]
		return
	}
	out[0], out[1] = in[0], byte((3*int(in[0])+int(in[1])+2)>>2)
	for i := 1; i < n-1; i++ {
		v := 3 * int(in[i])
		out[2*i] = byte((v + int(in[i-1]) + 1) >> 2)
		out[2*i+1] = byte((v + int(in[i+1]) + 2) >> 2)
	}
	out[2*n-2], out[2*n-1] = byte((3*int(in[n-1])+int(in[n-2])+1)>>2), in[n-1]
}

// fancyBoth is libjpeg's h2v2 fancy upsampling of one output row from its
// nearer input row and the further one (h1v2 when not across): 9/16,
// 3/16, 3/16 and 1/16 of the four nearest samples, with libjpeg's
// rounding.
func fancyBoth(near, far, out []byte, across, lower bool) {
	n := len(near)
	col := func(i int) int { return 3*int(near[i]) + int(far[i]) }
	if !across { // h1v2: (3 * nearer + further + bias) / 4
		bias := 1
		if lower {
			bias = 2
		}
		for i := range n {
			out[i] = byte((col(i) + bias) >> 2)
		}
		return
	}
	if n == 1 {
		v := byte((col(0)*4 + 8) >> 4)
		out[0], out[1] = v, v
		return
	}
	this, next := col(0), col(1)
	out[0], out[1] = byte((this*4+8)>>4), byte((this*3+next+7)>>4)
	last := this
	this = next
	for i := 1; i < n-1; i++ {
		next = col(i + 1)
		out[2*i] = byte((this*3 + last + 8) >> 4)
		out[2*i+1] = byte((this*3 + next + 7) >> 4)
		last, this = this, next
	}
	out[2*n-2], out[2*n-1] = byte((this*3+last+8)>>4), byte((this*4+7)>>4)
}
