package vision

import (
	"image"
	"image/color"
	"image/draw"
)

// asRGB is img's pixels' colours as Pillow's convert("RGB") makes them (so
// as torchvision's loaders see them), in dst's memory when it holds them:
// a pixel's colour, not premultiplied by its alpha; a JPEG's chroma
// upsampled and converted to RGB as libjpeg does (jdsample.c's fancy
// upsampling, jdcolor.c's fixed-point conversion), which Pillow decodes
// with, where Go's decoder repeats chroma samples; CMYK as Pillow converts
// it. Its alpha bytes are unused.
func asRGB(img image.Image, dst *image.RGBA) *image.RGBA {
	switch img := img.(type) {
	case *image.RGBA:
		return img
	case *image.NRGBA:
		return &image.RGBA{Pix: img.Pix, Stride: img.Stride, Rect: img.Rect}
	}
	b := img.Bounds()
	dst = reuse(dst, b)
	switch img := img.(type) {
	case *image.YCbCr:
		ycbcrToRGB(img, dst)
	case *image.Gray:
		for y := range b.Dy() {
			for x, v := range img.Pix[y*img.Stride : y*img.Stride+b.Dx()] {
				copy(dst.Pix[y*dst.Stride+4*x:], []byte{v, v, v, 255})
			}
		}
	case *image.CMYK:
		for y := range b.Dy() {
			for x := range b.Dx() {
				p := img.Pix[y*img.Stride+4*x:]
				cmykToRGB(dst.Pix[y*dst.Stride+4*x:], int(p[0]), int(p[1]), int(p[2]), int(p[3]))
			}
		}
	case *image.Paletted:
		// The palette's colours as they are, a transparent entry's too
		// (drawing would premultiply them to black).
		pal := make([][4]uint8, len(img.Palette))
		for i, c := range img.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			pal[i] = [4]uint8{n.R, n.G, n.B, 255}
		}
		for y := range b.Dy() {
			for x, k := range img.Pix[y*img.Stride : y*img.Stride+b.Dx()] {
				if int(k) < len(pal) {
					copy(dst.Pix[y*dst.Stride+4*x:], pal[k][:])
				}
			}
		}
	case *image.NRGBA64: // a 16-bit PNG with alpha: each channel's high byte
		for y := range b.Dy() {
			for x := range b.Dx() {
				p := img.Pix[y*img.Stride+8*x:]
				copy(dst.Pix[y*dst.Stride+4*x:], []byte{p[0], p[2], p[4], 255})
			}
		}
	default:
		n := &image.NRGBA{Pix: dst.Pix, Stride: dst.Stride, Rect: dst.Rect}
		draw.Draw(n, n.Rect, img, b.Min, draw.Src)
	}
	return dst
}

// cmykToRGB writes the RGB of a CMYK pixel to q[:4] as Pillow's
// convert("RGB") makes it: each colour (255-c)(255-k)/255, rounded as
// Pillow rounds.
func cmykToRGB(q []byte, c, m, y, k int) {
	nk := 255 - k
	q[0], q[1], q[2], q[3] = uint8(nk-muldiv255(c, nk)), uint8(nk-muldiv255(m, nk)), uint8(nk-muldiv255(y, nk)), 255
}

// muldiv255 is a*b/255 rounded, as Pillow computes it.
func muldiv255(a, b int) int {
	t := a*b + 128
	return ((t >> 8) + t) >> 8
}
