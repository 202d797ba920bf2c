package main

import (
	"fmt"
	"strings"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers/vision"
	"github.com/actorfeed/actorfeed/tensor"
)

// builtinMaps are the maps the CLI knows by name: actorfeed serve's
// workers run them for trainers that name them (actors.Map.Name), and
// bench --map measures them.
var builtinMaps = map[string]actors.MapFunc{"normalize": normalize}

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

// mapNamed is the built-in map called name.
func mapNamed(name string) (actors.MapFunc, error) {
	fn := builtinMaps[name]
	if fn == nil {
		var names []string
		for n := range builtinMaps {
			names = append(names, n)
		}
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
