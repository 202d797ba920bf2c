package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers/vision"
	"github.com/actorfeed/actorfeed/tensor"
)

// builtinMaps are the maps the CLI knows by name: actorfeed serve's
// workers run them for trainers that name them (actors.Map.Name), and
// bench --map measures them.
var builtinMaps = map[string]actors.MapFunc{"normalize": normalize, "to_tensor": toTensor}

// normalize is a trainer's usual first map: the images (slot 0, bytes)
// become float32 in [0, 1], four times the bytes.
func normalize(s tensor.Slots) (tensor.Slots, error) {
	img := s[0].Tensor
	if img.DType() != tensor.Uint8 {
		return nil, fmt.Errorf("normalize: slot 0 is %v, not uint8", img.DType())
	}
	in := img.Bytes()
	out := make([]float32, len(in))
	for i, b := range in {
		out[i] = float32(b) / 255
	}
	s[0].Tensor = tensor.MustFromSlice(img.Shape(), out)
	return s, nil
}

// toTensor gives a batch the shapes and dtypes a torchvision user gets
// from a data set and its ToTensor: the images (slot 0, uint8 [B, H, W]
// or [B, H, W, C]) as float32 [B, C, H, W] in [0, 1], and class labels
// (slot 1, of an integer type) as int64, which cross_entropy takes; a
// slot 1 of floats or of bytes is left as it is.
func toTensor(s tensor.Slots) (tensor.Slots, error) {
	img := s[0].Tensor
	shape := img.Shape()
	if img.DType() != tensor.Uint8 || (len(shape) != 3 && len(shape) != 4) {
		return nil, fmt.Errorf("to_tensor: slot 0 is %v, not uint8 images [B, H, W] or [B, H, W, C]", img)
	}
	b, h, w, c := shape[0], shape[1], shape[2], 1
	if len(shape) == 4 {
		c = shape[3]
	}
	in := img.Bytes()
	out := make([]float32, len(in))
	for i, v := range in { // in is [B, H, W, C]: element i goes to [B, C, H, W]
		n, px, ch := i/(h*w*c), (i/c)%(h*w), i%c
		out[(n*c+ch)*h*w+px] = float32(v) / 255
	}
	s[0].Tensor = tensor.MustFromSlice(tensor.Shape{b, c, h, w}, out)
	if len(s) > 1 && len(s[1].LoD) == 0 {
		if labels, err := widen(s[1].Tensor); err == nil { // float labels are left as they are
			s[1].Tensor = labels
		}
	}
	return s, nil
}

// mapNamed is the built-in map called name.
func mapNamed(name string) (actors.MapFunc, error) {
	fn := builtinMaps[name]
	if fn == nil {
		var names []string
		for n := range builtinMaps {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("--map %q: want one of %s, or decode(...)", name, strings.Join(names, ", "))
	}
	return fn, nil
}

// sampleMaps makes the maps whose names carry parameters:
// decode(size=224,crop=random,flip,normalize=imagenet,...) decodes and
// augments each sample's encoded image (readers/vision, docs/formats.md).
// run's pipelines, YAML programs and serve's workers make them alike.
func sampleMaps(name string) (actors.SampleMapFunc, error) {
	m, err := decodeMap(name)
	if err != nil {
		return nil, err
	}
	if m.Workers == 0 {
		m.Workers = startProcs // a worker a core, whatever spareProcs adds
	}
	m.Gate = imageGate
	if m.Turbo() {
		spareProcs()
	}
	return func(s actors.Samples, slots tensor.Slots) (tensor.Slots, error) {
		return m.ApplyIn(s.Storage, s.Epoch, s.IDs, s.Name, slots)
	}, nil
}

// imageGate is the decode maps' gate: as many images in work at once
// as the process has cores, whatever the lanes or a worker's tasks.
var imageGate = vision.NewGate(startProcs)

// decodeMap reads a decode(...) map's parameters.
func decodeMap(name string) (vision.Map, error) {
	params, opens := strings.CutPrefix(name, "decode(")
	params, closes := strings.CutSuffix(params, ")")
	if !opens || !closes {
		return vision.Map{}, fmt.Errorf("no map %q", name)
	}
	return vision.ParseMap(params)
}

// checkMap checks a --map name: a built-in map, or one sampleMaps makes.
func checkMap(name string) error {
	if _, err := mapNamed(name); err == nil || !strings.Contains(name, "(") {
		return err
	}
	if _, err := decodeMap(name); err != nil {
		return fmt.Errorf("--map %q: %w", name, err)
	}
	return nil
}
