package vision

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/tensor"
)

// Map runs a Transform over a batch: slot Slot, each sample's encoded
// image as a uint8 sequence (a WebDataset shard's jpg or png field, a
// TFRecord bytes feature), becomes a float32 tensor [n, C, Size, Size]
// ([n, Size, Size, C] with HWC); the other slots pass unchanged. The
// samples are spread over Workers goroutines (default GOMAXPROCS), joined
// before it returns; with a Gate, each transforms an image only while it
// holds one of the gate's places.
type Map struct {
	T       Transform
	Slot    int
	Workers int
	Gate    *Gate
}

// Gate bounds how many images the maps that share it transform at once.
// A process's maps share one the size of its cores: lanes run a map
// each, batches side by side, and a data service worker runs a task's;
// without it each spreads its batch over every core, and two lanes on
// two cores had four images in work at once (docs/images.md).
type Gate struct{ places chan struct{} }

// NewGate returns a gate of n places, at least one.
func NewGate(n int) *Gate { return &Gate{places: make(chan struct{}, max(n, 1))} }

// apply is t.apply in one of g's places; a nil gate has room always.
func (g *Gate) apply(t Transform, epoch int, id uint64, data []byte, out []float32, sc *scratch) error {
	if g != nil {
		g.places <- struct{}{}
		defer func() { <-g.places }()
	}
	return t.apply(epoch, id, data, out, sc)
}

// Apply transforms batch, whose samples are ids of epoch; name names a
// sample in errors ("shard-000003.tar#17"). Images that do not decode
// (ErrImage) are a *format.BadSamples error naming each, returned with
// the result, in which their rows are zeros: a pipeline under the skip
// policy drops them. Any other error comes with no result.
func (m Map) Apply(epoch int, ids []uint64, name func(uint64) string, batch tensor.Slots) (tensor.Slots, error) {
	return m.ApplyIn(nil, epoch, ids, name, batch)
}

// ApplyIn is Apply that makes its images in what storage gives, when it
// gives storage that nothing reads any more (a stepped batch's, as
// actors.Samples.Storage does), every byte of which it writes.
func (m Map) ApplyIn(storage tensor.Alloc, epoch int, ids []uint64, name func(uint64) string, batch tensor.Slots) (tensor.Slots, error) {
	t, err := m.T.withDefaults()
	if err != nil {
		return nil, err
	}
	if m.Slot < 0 || m.Slot >= len(batch) {
		return nil, fmt.Errorf("vision: slot %d: the batch has %d slots", m.Slot, len(batch))
	}
	in := batch[m.Slot]
	n := len(ids)
	if in.DType() != tensor.Uint8 || len(in.LoD) != 1 || len(in.LoD[0]) != n+1 {
		return nil, fmt.Errorf("vision: slot %d is %v %v with %d LoD levels, not an encoded image (a uint8 sequence) for each of %d samples: name the images' slot with slot=N",
			m.Slot, in.DType(), in.Shape(), len(in.LoD), n)
	}
	shape := tensor.Shape{n, t.Channels, t.Size, t.Size}
	if t.HWC {
		shape = tensor.Shape{n, t.Size, t.Size, t.Channels}
	}
	if shape.NumElements() < 0 || shape.NumElements() > 1<<46 {
		return nil, fmt.Errorf("vision: %v images: too many values", shape)
	}
	out, err := tensor.WrapBytes(tensor.Float32, shape, tensor.Storage(nil, 4*shape.NumElements(), storage))
	if err != nil {
		return nil, err
	}
	values, err := tensor.View[float32](out)
	if err != nil {
		return nil, err
	}
	data, offs := in.Bytes(), in.LoD[0]
	errs := make([]error, n)
	// Each worker takes the next image when done with one: images differ
	// in size, and a fixed share would leave a worker idle at a batch's
	// end while another decodes its last big ones.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, m.workers()) {
		wg.Go(func() {
			sc := scratches.Get().(*scratch)
			defer scratches.Put(sc)
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				errs[i] = m.Gate.apply(t, epoch, ids[i], data[offs[i]:offs[i+1]], values[i*t.Values():(i+1)*t.Values()], sc)
			}
		})
	}
	wg.Wait()
	var bad format.BadSamples
	for i, err := range errs {
		if err == nil {
			continue
		}
		err = fmt.Errorf("%s: %w", name(ids[i]), err)
		if !errors.Is(err, ErrImage) {
			return nil, err
		}
		clear(values[i*t.Values() : (i+1)*t.Values()])
		bad.Rows, bad.Errs = append(bad.Rows, i), append(bad.Errs, err)
	}
	res := append(tensor.Slots(nil), batch...)
	res[m.Slot] = tensor.LoDTensor{Tensor: out}
	if len(bad.Rows) > 0 {
		return res, &bad
	}
	return res, nil
}

// scratches keeps the workers' decode and resize buffers from one batch to
// the next: made afresh, a batch's images were a few MB of new memory for
// the collector, and its pages faulted in again.
var scratches = sync.Pool{New: func() any { return &scratch{} }}

// Turbo reports whether m decodes JPEGs with TurboJPEG: its decoder is
// not GoDecoder, and LibTurboJPEG loads. Its workers then spend about
// half their time in C, outside the Go scheduler's count of running
// goroutines (GOMAXPROCS); docs/images.md says what a process gains from
// spare Ps then.
func (m Map) Turbo() bool {
	if m.T.Decoder == GoDecoder {
		return false
	}
	_, err := loadTurbo()
	return err == nil
}

func (m Map) workers() int {
	if m.Workers > 0 {
		return m.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// ParseMap reads a Map from its parameters, comma-separated key=value
// ("size=224,crop=random,flip,normalize=imagenet"): size (required);
// crop random (default), center or whole; scale and ratio low:high; flip
// (or flip=false); channels 3 or 1; normalize none (default) or imagenet;
// layout chw (default) or hwc; seed; slot (default 0); workers; decoder
// auto (default), go or turbo.
func ParseMap(params string) (Map, error) {
	m := Map{}
	for _, kv := range strings.Split(params, ",") {
		key, value, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if err := m.set(key, strings.TrimSpace(value)); err != nil {
			return Map{}, fmt.Errorf("vision: %q: %w", kv, err)
		}
	}
	if _, err := m.T.withDefaults(); err != nil {
		return Map{}, err
	}
	return m, nil
}

func (m *Map) set(key, value string) error {
	var err error
	switch key {
	case "size":
		m.T.Size, err = intIn(value, 1, MaxSize)
	case "crop":
		m.T.Crop, err = oneOf(value, map[string]Crop{"random": RandomResized, "center": Center, "whole": Whole})
	case "scale":
		m.T.Scale, err = pair(value)
	case "ratio":
		m.T.Ratio, err = pair(value)
	case "flip":
		m.T.Flip = true
		if value != "" {
			m.T.Flip, err = strconv.ParseBool(value)
		}
	case "channels":
		m.T.Channels, err = intIn(value, 1, 3)
	case "normalize":
		var v bool
		if v, err = oneOf(value, map[string]bool{"none": false, "imagenet": true}); v {
			m.T.Mean, m.T.Std = ImageNetMean, ImageNetStd
		}
	case "layout":
		m.T.HWC, err = oneOf(value, map[string]bool{"chw": false, "hwc": true})
	case "seed":
		m.T.Seed, err = strconv.ParseUint(value, 10, 64)
	case "slot":
		m.Slot, err = intIn(value, 0, 1<<16)
	case "workers":
		m.Workers, err = intIn(value, 1, 4096)
	case "decoder":
		m.T.Decoder, err = oneOf(value, map[string]Decoder{"auto": AutoDecoder, "go": GoDecoder, "turbo": TurboDecoder})
	default:
		err = fmt.Errorf("unknown key %q (size, crop, scale, ratio, flip, channels, normalize, layout, seed, slot, workers, decoder)", key)
	}
	return err
}

func intIn(s string, lo, hi int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	return v, nil
}

func oneOf[T any](s string, choices map[string]T) (T, error) {
	v, ok := choices[s]
	if !ok {
		var keys []string
		for k := range choices {
			keys = append(keys, k)
		}
		var zero T
		return zero, fmt.Errorf("want one of %s", strings.Join(keys, ", "))
	}
	return v, nil
}

func pair(s string) ([2]float64, error) {
	lo, hi, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseFloat(lo, 64)
	b, err2 := strconv.ParseFloat(hi, 64)
	if !ok || err1 != nil || err2 != nil {
		return [2]float64{}, fmt.Errorf("want low:high")
	}
	return [2]float64{a, b}, nil
}
