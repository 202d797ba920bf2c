package vision

import "image"

// Occupy takes one of g's places, as a map's worker does for an image,
// until release.
func Occupy(g *Gate) (release func()) {
	g.places <- struct{}{}
	return func() { <-g.places }
}

// Decode decodes data whole as a map's decoder d does, before any crop or
// resize: its pixels' RGB as Pillow's convert("RGB") makes them.
func Decode(data []byte, d Decoder) (*image.RGBA, error) {
	if d == GoDecoder || len(data) < 2 || data[0] != 0xff || data[1] != 0xd8 {
		return decodeGo(data, nil)
	}
	tj, err := loadTurbo()
	if err != nil {
		return nil, err
	}
	w, h, rgb, err := tj.header(data)
	if err != nil {
		return nil, err
	}
	if w < 1 || h < 1 || w*h > MaxPixels {
		return nil, ErrImage
	}
	if !rgb {
		return tj.decodeCMYK(data, w, h, 8, nil)
	}
	return tj.decode(data, w, h, 8, nil)
}

// TurboMakesRGB says whether TurboJPEG makes RGB of data itself: false
// for a CMYK or YCCK JPEG (decodeCMYK), or where it cannot read it.
func TurboMakesRGB(data []byte) bool {
	tj, err := loadTurbo()
	if err != nil {
		return false
	}
	_, _, rgb, err := tj.header(data)
	return err == nil && rgb
}
