package main

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/actorfeed/actorfeed/tensor"
)

// softmax is a softmax-regression classifier of 784-pixel images into 10
// classes, trained data-parallel: every device computes the gradient of
// its own batch on the shared weights, the devices meet at a barrier, and
// the mean gradient is applied once (synchronous all-reduce). The weights
// change only while every device waits at the barrier, so computing a
// gradient needs no lock.
type softmax struct {
	devices int
	lr      float32

	w []float32 // [classes][pixels]
	b []float32 // [classes]

	mu      sync.Mutex
	sumW    []float32 // gradients of the step so far
	sumB    []float32
	stepN   int           // samples in the step so far
	arrived int           // devices arrived at the barrier
	done    chan struct{} // closed when the current step's update is applied
	loss    float64       // summed over the samples seen since lastLoss
	seen    int
}

const pixels = imageSide * imageSide

func newSoftmax(devices int, lr float32) *softmax {
	return &softmax{devices: devices, lr: lr, w: make([]float32, classes*pixels), b: make([]float32, classes),
		sumW: make([]float32, classes*pixels), sumB: make([]float32, classes), done: make(chan struct{})}
}

// features converts a batch of uint8 images to [0,1] floats and its labels,
// of any integer type, to ints.
func features(images, labels tensor.Tensor) ([]float32, []int, error) {
	px, err := tensor.View[uint8](images)
	if err != nil {
		return nil, nil, fmt.Errorf("images: %w", err)
	}
	n := images.Rows()
	if len(px) != n*pixels {
		return nil, nil, fmt.Errorf("images of shape %v, want [n,1,28,28]", images.Shape())
	}
	x := make([]float32, len(px))
	for i, p := range px {
		x[i] = float32(p) / 255
	}
	y := make([]int, 0, n)
	switch labels.DType() {
	case tensor.Uint8:
		v, _ := tensor.View[uint8](labels)
		for _, l := range v {
			y = append(y, int(l))
		}
	case tensor.Int64:
		v, _ := tensor.View[int64](labels)
		for _, l := range v {
			y = append(y, int(l))
		}
	default:
		return nil, nil, fmt.Errorf("labels of type %v, want uint8 or int64", labels.DType())
	}
	if len(y) != n {
		return nil, nil, fmt.Errorf("%d images but %d labels: the slots are not aligned", n, len(y))
	}
	for _, l := range y {
		if l < 0 || l >= classes {
			return nil, nil, fmt.Errorf("label %d outside 0..9", l)
		}
	}
	return x, y, nil
}

// scores computes the class probabilities of one image into p.
func (m *softmax) scores(x []float32, p []float32) {
	maxZ := float32(math.Inf(-1))
	for c := range classes {
		z := m.b[c]
		row := m.w[c*pixels : (c+1)*pixels]
		for k, v := range x {
			z += row[k] * v
		}
		p[c] = z
		maxZ = max(maxZ, z)
	}
	sum := float32(0)
	for c := range p {
		p[c] = float32(math.Exp(float64(p[c] - maxZ)))
		sum += p[c]
	}
	for c := range p {
		p[c] /= sum
	}
}

// step is one device's training step on a batch.
func (m *softmax) step(ctx context.Context, images, labels tensor.Tensor) error {
	x, y, err := features(images, labels)
	if err != nil {
		return err
	}
	gw := make([]float32, classes*pixels)
	gb := make([]float32, classes)
	p := make([]float32, classes)
	loss := 0.0
	for i, label := range y {
		xi := x[i*pixels : (i+1)*pixels]
		m.scores(xi, p)
		loss -= math.Log(float64(max(p[label], 1e-12)))
		p[label] -= 1
		for c, d := range p {
			gb[c] += d
			row := gw[c*pixels : (c+1)*pixels]
			for k, v := range xi {
				row[k] += d * v
			}
		}
	}
	return m.allReduce(ctx, gw, gb, len(y), loss)
}

// allReduce adds a device's gradient; the last device to arrive applies the
// mean and releases the others.
func (m *softmax) allReduce(ctx context.Context, gw, gb []float32, n int, loss float64) error {
	m.mu.Lock()
	for k, v := range gw {
		m.sumW[k] += v
	}
	for c, v := range gb {
		m.sumB[c] += v
	}
	m.stepN += n
	m.seen += n
	m.loss += loss
	m.arrived++
	done := m.done
	if m.arrived == m.devices {
		m.apply()
		close(m.done)
		m.done = make(chan struct{})
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apply takes a gradient step with the mean of the step's gradients; mu is
// held.
func (m *softmax) apply() {
	scale := m.lr / float32(max(m.stepN, 1))
	for k, g := range m.sumW {
		m.w[k] -= scale * g
		m.sumW[k] = 0
	}
	for c, g := range m.sumB {
		m.b[c] -= scale * g
		m.sumB[c] = 0
	}
	m.stepN, m.arrived = 0, 0
}

// lastLoss returns the mean loss since it was last called.
func (m *softmax) lastLoss() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.loss / float64(max(m.seen, 1))
	m.loss, m.seen = 0, 0
	return l
}

// accuracy is the fraction of the samples whose most probable class is
// their label.
func (m *softmax) accuracy(images, labels tensor.Tensor) (right, n int, err error) {
	x, y, err := features(images, labels)
	if err != nil {
		return 0, 0, err
	}
	p := make([]float32, classes)
	for i, label := range y {
		m.scores(x[i*pixels:(i+1)*pixels], p)
		best := 0
		for c := range p {
			if p[c] > p[best] {
				best = c
			}
		}
		if best == label {
			right++
		}
	}
	return right, len(y), nil
}
