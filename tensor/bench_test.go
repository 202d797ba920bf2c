package tensor_test

import (
	"testing"

	"github.com/actorfeed/actorfeed/tensor"
)

// BenchmarkBatch compares assembling a batch of 128 Fashion-MNIST-sized
// instances (784-byte image, 8-byte label) with a plain copy of the same
// bytes into a preallocated buffer, in one run (goal: ratio >= 0.5).
func BenchmarkBatch(b *testing.B) {
	const n = 128
	instances := make([]tensor.Slots, n)
	srcs := make([][]byte, 0, 2*n)
	total := 0
	for i := range instances {
		img := make([]uint8, 28*28)
		img[0] = uint8(i)
		instances[i] = tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, img)},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{int64(i)})},
		}
		srcs = append(srcs, instances[i][0].Bytes(), instances[i][1].Bytes())
		total += instances[i].Bytes()
	}
	b.Run("plain-copy", func(b *testing.B) {
		dst := make([]byte, total)
		b.SetBytes(int64(total))
		b.ReportAllocs()
		for b.Loop() {
			off := 0
			for _, s := range srcs {
				off += copy(dst[off:], s)
			}
		}
	})
	b.Run("concat", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tensor.Concat(instances); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("split", func(b *testing.B) {
		batch, _ := tensor.Concat(instances)
		b.SetBytes(int64(total))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tensor.Split(batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	s := tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, make([]uint8, 784))},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{3})},
	}
	enc, _ := tensor.Encode(s)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tensor.Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStack decodes a group of 128 Fashion-MNIST-sized records per
// iteration: one by one with Decode (each in storage of its own), and onto
// a Stack (one block for the group). Per record: ns/op / 128.
func BenchmarkStack(b *testing.B) {
	const n = 128
	enc, _ := tensor.Encode(tensor.Slots{
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, make([]uint8, 784))},
		{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{3})},
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(n * len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			for range n {
				if _, err := tensor.Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("stack", func(b *testing.B) {
		st := tensor.NewStack(n)
		b.SetBytes(int64(n * len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			for range n {
				if out, err := st.AppendEncoded(enc); err != nil || out != nil {
					b.Fatal("not stacked", err)
				}
			}
			st.Take()
		}
	})
}

// BenchmarkBatchRecycled is batch assembly when the consumer hands each batch
// back for reuse, against the same plain copy.
func BenchmarkBatchRecycled(b *testing.B) {
	const n = 128
	instances := make([]tensor.Slots, n)
	total := 0
	for i := range instances {
		instances[i] = tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, make([]uint8, 784))},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1}, []int64{int64(i)})},
		}
		total += instances[i].Bytes()
	}
	batch, _ := tensor.Concat(instances)
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if batch, err = tensor.ConcatInto(batch, instances); err != nil {
			b.Fatal(err)
		}
	}
}
