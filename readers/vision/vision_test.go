package vision_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/vision"
	"github.com/actorfeed/actorfeed/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// picture is a w x h RGB image whose pixel (x, y) is (x, y, 100) scaled
// to 0-255, encoded as PNG or JPEG.
func picture(t testing.TB, w, h int, asJPEG bool) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 255 / max(w-1, 1)), uint8(y * 255 / max(h-1, 1)), 100, 255})
		}
	}
	var b bytes.Buffer
	if asJPEG {
		require.NoError(t, jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}))
	} else {
		require.NoError(t, png.Encode(&b, img))
	}
	return b.Bytes()
}

// batch is a uint8 sequence slot of the encoded images, and a label slot.
func batch(t testing.TB, images ...[]byte) tensor.Slots {
	var data []byte
	offs := []int{0}
	for _, im := range images {
		data = append(data, im...)
		offs = append(offs, len(data))
	}
	seq, err := tensor.NewLoDTensor(tensor.MustFromSlice(tensor.Shape{len(data)}, data), tensor.LoD{offs})
	require.NoError(t, err)
	labels := make([]int64, len(images))
	return tensor.Slots{seq, {Tensor: tensor.MustFromSlice(tensor.Shape{len(images), 1}, labels)}}
}

func name(id uint64) string { return fmt.Sprintf("shard.tar#%d", id) }

func run(t *testing.T, spec string, epoch int, ids []uint64, b tensor.Slots) []float32 {
	t.Helper()
	m, err := vision.ParseMap(spec)
	require.NoError(t, err)
	out, err := m.Apply(epoch, ids, name, b)
	require.NoError(t, err)
	v, err := tensor.View[float32](out[0].Tensor)
	require.NoError(t, err)
	return append([]float32(nil), v...)
}

// A sample's augmentation is a function of (seed, epoch, id): the same
// again, another in another epoch, for another sample or seed.
func TestAugmentationIsAFunctionOfSeedEpochAndSample(t *testing.T) {
	img := picture(t, 64, 48, true)
	b := batch(t, img, img)
	spec := "size=16,crop=random,flip,seed=5"
	a := run(t, spec, 3, []uint64{7, 8}, b)
	require.Equal(t, a, run(t, spec, 3, []uint64{7, 8}, b), "the same again")
	require.Equal(t, a, run(t, spec+",workers=1", 3, []uint64{7, 8}, b), "whatever the workers")
	n := 3 * 16 * 16
	require.NotEqual(t, a[:n], a[n:], "the two samples' choices differ")
	require.NotEqual(t, a, run(t, spec, 4, []uint64{7, 8}, b), "another epoch")
	require.NotEqual(t, a, run(t, "size=16,crop=random,flip,seed=6", 3, []uint64{7, 8}, b), "another seed")
}

// The output's shape, layout and values: a whole image resized to its
// own size is itself, in [0, 1] or normalised, CHW or HWC, mirrored when
// flipped.
func TestLayoutNormalisationAndFlip(t *testing.T) {
	img := picture(t, 8, 8, false)
	b := batch(t, img)
	m, err := vision.ParseMap("size=8,crop=whole")
	require.NoError(t, err)
	out, err := m.Apply(0, []uint64{1}, name, b)
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{1, 3, 8, 8}, out[0].Shape())
	require.True(t, out[1].Equal(b[1]), "the labels pass")
	chw := run(t, "size=8,crop=whole", 0, []uint64{1}, b)
	px := func(c, y, x int) float32 { return chw[c*64+y*8+x] }
	require.InDelta(t, 255.0/255, px(0, 3, 7), 1e-6, "red grows with x")
	require.InDelta(t, 0, px(0, 3, 0), 1e-6)
	require.InDelta(t, 100.0/255, px(2, 5, 5), 1e-6)

	hwc := run(t, "size=8,crop=whole,layout=hwc", 0, []uint64{1}, b)
	for c := range 3 {
		for i := range 64 {
			require.Equal(t, chw[c*64+i], hwc[i*3+c])
		}
	}
	norm := run(t, "size=8,crop=whole,normalize=imagenet", 0, []uint64{1}, b)
	require.InDelta(t, (100.0/255-0.406)/0.225, norm[2*64+9], 1e-5)

	// Find a sample whose coin says flip: its image is the mirror.
	for id := uint64(0); ; id++ {
		f := run(t, "size=8,crop=whole,flip", 0, []uint64{id}, b)
		if f[0] == chw[0] {
			continue
		}
		for c := range 3 {
			for y := range 8 {
				for x := range 8 {
					require.Equal(t, px(c, y, x), f[c*64+y*8+7-x])
				}
			}
		}
		break
	}
	gray := run(t, "size=8,crop=whole,channels=1", 0, []uint64{1}, b)
	require.Len(t, gray, 64)
}

// A random crop keeps a part of the image: a crop of a one-colour image
// is that colour, however it is cut.
func TestRandomCropsOfOneColour(t *testing.T) {
	img := image.NewGray(image.Rect(0, 0, 37, 23))
	for i := range img.Pix {
		img.Pix[i] = 200
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	b := batch(t, buf.Bytes(), buf.Bytes(), buf.Bytes())
	for epoch := range 20 {
		for _, v := range run(t, "size=12,flip,scale=0.01:1,ratio=0.2:5", epoch, []uint64{1, 2, 3}, b) {
			require.InDelta(t, 200.0/255, v, 1e-5)
		}
	}
}

// White and black pixels come out as exactly 1 and 0, gray or colour,
// whatever the crop and scale: Pillow rounds into bytes, and weights that
// sum to 1 only within float32's rounding (the luma's three too) must not
// put a white pixel past 1.
func TestWhiteIsOneAndBlackZero(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 41, 29)) // white and black halves
	for i := range img.Pix {
		img.Pix[i] = 255
		if x := (i / 4) % 41; x < 20 && i%4 != 3 {
			img.Pix[i] = 0
		}
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	b := batch(t, buf.Bytes(), buf.Bytes())
	for _, spec := range []string{"size=20,channels=1", "size=20", "size=20,layout=hwc", "size=7,channels=1,crop=whole", "size=64,channels=1,crop=whole"} {
		var lo, hi float32 = 1, 0
		for epoch := range 10 {
			for _, v := range run(t, spec, epoch, []uint64{1, 2}, b) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		require.Equal(t, [2]float32{0, 1}, [2]float32{lo, hi}, spec)
	}
}

// A damaged image, or one whose header declares more pixels than may be
// decoded, is an error naming the sample, not a panic or a huge
// allocation.
func TestADamagedImageNamesItsSample(t *testing.T) {
	good := picture(t, 10, 10, true)
	m, err := vision.ParseMap("size=8")
	require.NoError(t, err)
	_, err = m.Apply(0, []uint64{4, 5}, name, batch(t, good, good[:40]))
	require.ErrorIs(t, err, vision.ErrImage)
	require.ErrorContains(t, err, "shard.tar#5: ")

	huge := picture(t, 4, 4, false)
	binary.BigEndian.PutUint32(huge[16:], 100000) // IHDR's width and height
	binary.BigEndian.PutUint32(huge[20:], 100000)
	binary.BigEndian.PutUint32(huge[29:], crc32.ChecksumIEEE(huge[12:29]))
	_, err = m.Apply(0, []uint64{6}, name, batch(t, huge))
	require.ErrorIs(t, err, vision.ErrImage)
	require.ErrorContains(t, err, "100000x100000 pixels")

	_, err = m.Apply(0, []uint64{6}, name, tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 2}, []float32{1, 2})}})
	require.ErrorContains(t, err, "not an encoded image (a uint8 sequence) for each of 1 samples: name the images' slot with slot=N")
	var bad *format.BadSamples
	require.False(t, errors.As(err, &bad), "a batch the map cannot read at all has no bad samples")
}

// Images that do not decode come back as format.BadSamples with the
// result: their rows are zeros, the others what they are decoded alone,
// and each error names its sample and is damaged data.
func TestBadImagesComeBackWithTheResult(t *testing.T) {
	good, other := picture(t, 10, 10, true), picture(t, 12, 9, false)
	m, err := vision.ParseMap("size=8,crop=center")
	require.NoError(t, err)
	out, err := m.Apply(0, []uint64{4, 5, 6, 7}, name, batch(t, good, good[:40], other, []byte("no image")))
	var bad *format.BadSamples
	require.ErrorAs(t, err, &bad)
	require.Equal(t, []int{1, 3}, bad.Rows)
	require.ErrorContains(t, bad.Errs[0], "shard.tar#5: ")
	require.ErrorContains(t, bad.Errs[1], "shard.tar#7: ")
	require.ErrorIs(t, err, format.ErrCorrupt)
	require.ErrorIs(t, err, vision.ErrImage)
	require.ErrorContains(t, err, "(and 1 more samples of the batch)")
	v, err := tensor.View[float32](out[0].Tensor)
	require.NoError(t, err)
	per := len(v) / 4
	require.Equal(t, run(t, "size=8,crop=center", 0, []uint64{4}, batch(t, good)), v[:per])
	require.Equal(t, run(t, "size=8,crop=center", 0, []uint64{6}, batch(t, other)), v[2*per:3*per])
	require.Equal(t, make([]float32, per), v[per:2*per])
	require.Equal(t, make([]float32, per), v[3*per:])
}

func TestParseMap(t *testing.T) {
	m, err := vision.ParseMap("size=224, crop=center, flip=false, channels=1, layout=hwc, seed=9, slot=2, workers=3, scale=0.5:1")
	require.NoError(t, err)
	require.Equal(t, vision.Map{T: vision.Transform{Size: 224, Crop: vision.Center, Channels: 1, HWC: true, Seed: 9, Scale: [2]float64{0.5, 1}}, Slot: 2, Workers: 3}, m)
	for bad, msg := range map[string]string{
		"":                      "unknown key",
		"crop=random":           "size 0",
		"size=0":                "want an integer from 1",
		"size=8,crop=middle":    "want one of",
		"size=8,scale=2:1":      "scale",
		"size=8,scale=x":        "want low:high",
		"size=8,normalize=yes":  "want one of",
		"size=8,channels=2":     "channels 2",
		"size=8,ratio=0:1":      "ratio",
		"size=8,flip=sometimes": "invalid syntax",
	} {
		_, err := vision.ParseMap(bad)
		require.ErrorContains(t, err, msg, bad)
	}
}

// FuzzApply decodes whatever it is given: an error or an image, never a
// panic or an allocation the bytes do not justify.
func FuzzApply(f *testing.F) {
	f.Add(picture(f, 5, 3, true))
	f.Add(picture(f, 3, 5, false))
	m, err := vision.ParseMap("size=4,flip")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := m.Apply(0, []uint64{1}, name, batch(t, data))
		if bad, ok := errors.AsType[*format.BadSamples](err); err != nil && (!ok || !slices.Equal(bad.Rows, []int{0})) {
			t.Fatalf("not a bad sample: %v", err)
		}
		v, err := tensor.View[float32](out[0].Tensor)
		require.NoError(t, err)
		for _, x := range v {
			if math.IsNaN(float64(x)) || x < 0 || x > 1 {
				t.Fatalf("a value %v out of [0, 1]", x)
			}
		}
	})
}

// needTurbo skips where libturbojpeg cannot be loaded, except in CI, which
// installs it.
func needTurbo(t *testing.T) {
	t.Helper()
	if err := vision.TurboJPEG(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI installs libturbojpeg0: %v", err)
		}
		t.Skip(err)
	}
}

// Maps that share a gate transform an image only in one of its places:
// with the one place taken, neither moves; once it is free, both finish,
// their images those of maps without a gate.
func TestMapsSharingAGateWaitForItsPlaces(t *testing.T) {
	b := batch(t, picture(t, 40, 30, true), picture(t, 30, 40, false), picture(t, 64, 64, true))
	ids := []uint64{4, 5, 6}
	want := run(t, "size=16,workers=4,decoder=go", 1, ids, b)
	synctest.Test(t, func(t *testing.T) {
		gate := vision.NewGate(1)
		release := vision.Occupy(gate)
		outs := make([][]float32, 2)
		var wg sync.WaitGroup
		for k := range outs {
			wg.Go(func() {
				m, err := vision.ParseMap("size=16,workers=4,decoder=go")
				require.NoError(t, err)
				m.Gate = gate
				out, err := m.Apply(1, ids, name, b)
				require.NoError(t, err)
				v, err := tensor.View[float32](out[0].Tensor)
				require.NoError(t, err)
				outs[k] = v
			})
		}
		synctest.Wait() // every worker waits for the place
		require.Equal(t, [][]float32{nil, nil}, outs)
		release()
		wg.Wait()
		require.Equal(t, [][]float32{want, want}, outs)
	})
}

// A map decodes in C where TurboJPEG loads, unless it asks for Go's
// decoder.
func TestTurboSaysWhoDecodes(t *testing.T) {
	needTurbo(t)
	for params, want := range map[string]bool{"size=8": true, "size=8,decoder=turbo": true, "size=8,decoder=go": false} {
		m, err := vision.ParseMap(params)
		require.NoError(t, err)
		require.Equal(t, want, m.Turbo(), params)
	}
}

// TurboJPEG decodes as Go's decoder does, within a level or two of
// rounding; cropped and scaled at its reduced sizes, within a few levels;
// and a damaged stream is ErrImage, named by its sample.
func TestTurboJPEGDecodesAsGoDoes(t *testing.T) {
	needTurbo(t)
	img := picture(t, 64, 48, true)
	b := batch(t, img)
	for _, spec := range []string{"size=48,crop=center", "size=16,crop=random,flip,scale=0.9:1", "size=8,crop=whole,channels=1"} {
		goOut := run(t, spec+",decoder=go", 2, []uint64{9}, b)
		tjOut := run(t, spec+",decoder=turbo", 2, []uint64{9}, b)
		var diff float64
		for i := range goOut {
			diff += math.Abs(float64(goOut[i] - tjOut[i]))
		}
		require.Less(t, diff/float64(len(goOut)), 4.0/255, spec)
	}
	m, err := vision.ParseMap("size=8,decoder=turbo")
	require.NoError(t, err)
	_, err = m.Apply(0, []uint64{4, 5}, name, batch(t, img, img[:len(img)/2]))
	require.ErrorIs(t, err, vision.ErrImage)
	require.ErrorContains(t, err, "shard.tar#5: ")
}

// TurboJPEG's words for a damaged stream are read on the thread that failed:
// some live in thread-local storage, and read from another thread they say
// "No error".
func TestTurboJPEGSaysWhatIsWrong(t *testing.T) {
	needTurbo(t)
	img := picture(t, 64, 48, true)
	copy(img[2:], make([]byte, 64)) // past the SOI marker
	good := picture(t, 640, 480, true)
	m, err := vision.ParseMap("size=8,decoder=turbo,workers=2")
	require.NoError(t, err)
	// Goroutines that come back from C calls on other threads: good
	// images decoded beside the damaged one.
	var wg sync.WaitGroup
	errs := make(chan error, 8*20)
	for range 8 {
		wg.Go(func() {
			for range 20 {
				_, err := m.Apply(0, []uint64{1, 2, 3}, name, batch(t, good, img, good))
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, vision.ErrImage)
		require.NotContains(t, err.Error(), "No error")
	}
}

// Go's decoder refuses a JPEG whose header bytes were overwritten, as
// TurboJPEG does, where it used to skip to the next marker it found and
// give other pixels without an error; a header cut short, a segment
// longer than the file and a second SOI are refused too.
func TestGoRefusesADamagedJPEGHeader(t *testing.T) {
	good := picture(t, 32, 24, true)
	_, err := vision.Decode(good, vision.GoDecoder)
	require.NoError(t, err)
	zeroed := slices.Clone(good)
	copy(zeroed[2:], make([]byte, 64))
	_, err = vision.Decode(zeroed, vision.GoDecoder)
	require.ErrorIs(t, err, vision.ErrImage)
	require.ErrorContains(t, err, "byte 2 is 0x00 where a marker was due")
	long := slices.Clone(good[:40])
	long[4], long[5] = 0xff, 0xff // the first segment's length
	twice := append([]byte{0xff, 0xd8}, good...)
	for name, data := range map[string][]byte{"cut": good[:20], "long": long, "twice": twice} {
		_, err := vision.Decode(data, vision.GoDecoder)
		require.ErrorIs(t, err, vision.ErrImage, name)
	}
}

// Made in storage that holds other bytes (a stepped batch's), the images
// are what fresh storage gives: every value is written.
func TestImagesInRecycledStorage(t *testing.T) {
	b := batch(t, picture(t, 64, 48, true), picture(t, 30, 70, false), picture(t, 9, 9, true))
	ids := []uint64{1, 2, 3}
	for _, spec := range []string{"size=16,crop=random,flip", "size=12,crop=center,channels=1,layout=hwc", "size=20,crop=whole,normalize=imagenet"} {
		want := run(t, spec, 1, ids, b)
		m, err := vision.ParseMap(spec)
		require.NoError(t, err)
		used := false
		out, err := m.ApplyIn(func(size int) []byte {
			used = true
			nan := make([]float32, size/4+1)
			for i := range nan {
				nan[i] = float32(math.NaN())
			}
			return unsafe.Slice((*byte)(unsafe.Pointer(&nan[0])), 4*len(nan))
		}, 1, ids, name, b)
		require.NoError(t, err)
		require.True(t, used)
		got, err := tensor.View[float32](out[0].Tensor)
		require.NoError(t, err)
		require.Equal(t, want, got, spec)
	}
}
