package vision_test

import (
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/readers/vision"
)

// levels is how far an image a decoder made is from Pillow's RGB of it:
// the largest difference of a channel, and the mean.
func levels(t *testing.T, got *image.RGBA, w, h int, rgb []byte) (most int, mean float64) {
	t.Helper()
	require.Equal(t, image.Rect(0, 0, w, h), got.Rect, "size")
	sum := 0
	for y := range h {
		for x := range w {
			for c := range 3 {
				d := int(got.Pix[y*got.Stride+4*x+c]) - int(rgb[(y*w+x)*3+c])
				d = max(d, -d)
				most, sum = max(most, d), sum+d
			}
		}
	}
	return most, float64(sum) / float64(3*w*h)
}

// tolerance is the most a decoder may differ from Pillow on an image of
// format, by level and on average. TurboJPEG is the libjpeg-turbo Pillow
// decodes with; Go's JPEG decoder rounds its inverse DCT otherwise than
// libjpeg's (a level a plane, which the colour conversion scales by up to
// 1.8 before adding); PNG and the palettes are exact.
func tolerance(format string, d vision.Decoder) (int, float64) {
	if format == "JPEG" && d == vision.GoDecoder {
		return 3, 0.25
	}
	return 1, 0.05
}

// decoders are the JPEG decoders a machine has: Go's, and TurboJPEG's
// where it loads (CI installs it).
func decoders(t *testing.T) []vision.Decoder {
	if vision.TurboJPEG() == nil || os.Getenv("CI") != "" {
		return []vision.Decoder{vision.GoDecoder, vision.TurboDecoder}
	}
	return []vision.Decoder{vision.GoDecoder}
}

// pictures are images Pillow writes, drawn from seed: every mode a data
// set's images come in, JPEGs of every quality, subsampling and scan.
func pictures(seed uint64, n int) []oracle.Picture {
	r := rand.New(rand.NewPCG(seed, 0x9111))
	var out []oracle.Picture
	for i := range n {
		p := oracle.Picture{W: 1 + r.IntN(70), H: 1 + r.IntN(70), Seed: seed*1000 + uint64(i), Format: "JPEG"}
		switch r.IntN(8) {
		case 0, 1, 2:
			p.Mode, p.Quality, p.Subsampling, p.Progressive = "RGB", 30+r.IntN(71), r.IntN(3), r.IntN(3) == 0
		case 3:
			p.Mode, p.Quality = "L", 30+r.IntN(71)
		case 4:
			p.Mode, p.Quality = "CMYK", 60+r.IntN(41)
		default:
			p.Format = "PNG"
			p.Mode = []string{"RGB", "RGBA", "L", "LA", "P"}[r.IntN(5)]
			if p.Mode == "P" {
				p.Colors = 2 + r.IntN(255)
				if r.IntN(2) == 0 {
					k := r.IntN(2)
					p.Transparent = &k
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// Images of every mode and JPEG setting that Pillow writes decode, by
// each decoder, to Pillow's RGB of them (convert("RGB"), what
// torchvision's loaders train on), within the decoders' tolerance: a
// palette's transparent colour as it is, an alpha channel dropped, not
// multiplied in; a JPEG's chroma upsampled as libjpeg does. Before, Go's
// decoder repeated chroma samples (55 levels off at edges), drew a
// transparent palette entry black and multiplied colours by their alpha.
func TestImagesDecodeAsPillowDoes(t *testing.T) {
	o := oracle.Start(t)
	worst := map[string][2]float64{}
	for _, p := range pictures(1, 400) {
		data, err := o.Encode(p)
		require.NoError(t, err, "%+v", p)
		w, h, rgb, err := o.Image(data)
		require.NoError(t, err, "%+v", p)
		for _, d := range decoders(t) {
			got, err := vision.Decode(data, d)
			require.NoError(t, err, "%+v, decoder %d", p, d)
			most, mean := levels(t, got, w, h, rgb)
			tm, tmean := tolerance(p.Format, d)
			require.LessOrEqual(t, most, tm, "%+v, decoder %d: %d levels off", p, d, most)
			require.LessOrEqual(t, mean, tmean, "%+v, decoder %d: %.3f levels off on average", p, d, mean)
			key := fmt.Sprintf("%s %s decoder %d", p.Format, p.Mode, d)
			worst[key] = [2]float64{max(worst[key][0], float64(most)), max(worst[key][1], mean)}
		}
	}
	for k, v := range worst {
		t.Logf("%s: at most %.0f levels, %.3f on average", k, v[0], v[1])
	}
}

// CMYK and YCCK JPEGs (Adobe's, as print and stock photography keep
// them) decode on both paths, to Pillow's pixels within each decoder's
// tolerance: TurboJPEG makes no RGB of them, so it decodes them to CMYK,
// which is converted as Pillow converts it. Before, the TurboJPEG path
// refused them ("Unsupported color conversion request"), so which samples
// a job kept depended on whether the library was installed.
func TestCMYKAndYCCKJPEGsDecodeOnBothPaths(t *testing.T) {
	o := oracle.Start(t)
	for _, name := range []string{"cmyk.jpg", "ycck.jpg"} {
		data, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		w, h, rgb, err := o.Image(data)
		require.NoError(t, err)
		for _, d := range decoders(t) {
			got, err := vision.Decode(data, d)
			require.NoError(t, err, "%s, decoder %d", name, d)
			most, mean := levels(t, got, w, h, rgb)
			tm, tmean := tolerance("JPEG", d)
			require.LessOrEqual(t, most, tm, "%s, decoder %d", name, d)
			require.LessOrEqual(t, mean, tmean, "%s, decoder %d", name, d)
		}
		b := batch(t, data)
		// Through a map (TurboJPEG scaling its DCT), as TurboJPEG's RGB
		// JPEGs are (TestTurboJPEGDecodesAsGoDoes).
		goOut, tjOut := run(t, "size=16,crop=center,decoder=go", 0, []uint64{1}, b), run(t, "size=16,crop=center", 0, []uint64{1}, b)
		var diff float64
		for i := range goOut {
			diff += math.Abs(float64(goOut[i] - tjOut[i]))
		}
		require.Less(t, diff/float64(len(goOut)), 4.0/255, name)
	}
}

// FuzzImagesAgainstPillow mutates images Pillow wrote and requires each
// decoder to refuse what Pillow refuses, and, where Pillow reads the
// image, to give its pixels within the tolerance: TurboJPEG wherever it
// reads a stream (it stops at libjpeg's every warning), Go's PNG decoder
// wherever it reads one (the checksums hold), Go's JPEG decoder where the
// stream is also sound (soundBaseline). Go's JPEG decoder reads some
// damaged streams otherwise than libjpeg, which reads them with or
// without a warning: those it may read otherwise, never panicking or
// allocating past MaxPixels.
func FuzzImagesAgainstPillow(f *testing.F) {
	o := oracle.Start(f)
	for _, p := range pictures(2, 24) {
		data, err := o.Encode(p)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := oracle.Shared(t)
		w, h, rgb, perr := o.Image(data)
		format := "PNG"
		if len(data) > 2 && data[0] == 0xff && data[1] == 0xd8 {
			format = "JPEG"
		}
		// warned: libjpeg, stopping at every warning, refuses the stream.
		_, warned := vision.Decode(data, vision.TurboDecoder)
		if format != "JPEG" || vision.TurboJPEG() != nil {
			warned = nil
		}
		for _, d := range decoders(t) {
			got, err := vision.Decode(data, d)
			if err != nil {
				require.ErrorIs(t, err, vision.ErrImage, "a refusal is ErrImage")
				continue
			}
			if perr != nil {
				require.True(t, d == vision.GoDecoder && format == "JPEG", "decoder %d reads an image Pillow refuses: %v", d, perr)
				continue
			}
			if warned != nil || (d == vision.GoDecoder && format == "JPEG" && !soundBaseline(data)) {
				continue // a damaged stream, which Go's decoder read otherwise than libjpeg
			}
			most, mean := levels(t, got, w, h, rgb)
			tm, tmean := tolerance(format, d)
			require.LessOrEqual(t, most, tm, "decoder %d: %d levels off", d, most)
			require.LessOrEqual(t, mean, tmean, "decoder %d: %.3f levels off on average", d, mean)
		}
	})
}

// soundBaseline knows every baseline JPEG Pillow writes, of every mode,
// quality and subsampling, sound, and knows no progressive one; it finds
// unsound the stream CI's fuzzing found (testdata/run-past-block.jpg, a
// CMYK JPEG), in which a run of zeros goes past a block's end at block
// row 6: libjpeg reads it without a warning, Go's decoder otherwise (254
// levels off from there).
func TestSoundBaselineKnowsPillowsJPEGs(t *testing.T) {
	o := oracle.Start(t)
	baseline := 0
	for _, p := range pictures(3, 200) {
		if p.Format != "JPEG" {
			continue
		}
		data, err := o.Encode(p)
		require.NoError(t, err, "%+v", p)
		require.Equal(t, !p.Progressive, soundBaseline(data), "%+v", p)
		if !p.Progressive {
			baseline++
		}
	}
	require.Greater(t, baseline, 50)
	for _, name := range []string{"cmyk.jpg", "ycck.jpg"} {
		data, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		require.True(t, soundBaseline(data), name)
	}
	damaged, err := os.ReadFile("testdata/run-past-block.jpg")
	require.NoError(t, err)
	require.False(t, soundBaseline(damaged))
	_, _, _, err = o.Image(damaged)
	require.NoError(t, err, "Pillow reads it")
}
