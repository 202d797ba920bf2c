package vision_test

import (
	"testing"

	"github.com/actorfeed/actorfeed/readers/vision"
)

// BenchmarkApply is one image a loop, on one goroutine: decode, random
// resized crop to 224, flip and ImageNet's normalisation of a 256 x 256
// JPEG (quality 95) or PNG.
func BenchmarkApply(b *testing.B) {
	for _, c := range []struct {
		name, decoder string
		jpeg          bool
	}{{"jpeg256-go", "go", true}, {"jpeg256-turbo", "turbo", true}, {"png256", "go", false}} {
		b.Run(c.name, func(b *testing.B) {
			img := picture(b, 256, 256, c.jpeg)
			m, err := vision.ParseMap("size=224,crop=random,flip,normalize=imagenet,workers=1,decoder=" + c.decoder)
			if err != nil {
				b.Fatal(err)
			}
			in := batch(b, img)
			b.SetBytes(int64(len(img)))
			for i := 0; b.Loop(); i++ {
				if _, err := m.Apply(i, []uint64{uint64(i)}, name, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
