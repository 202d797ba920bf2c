package service

import (
	"math/rand/v2"
	"testing"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// envelopes is a remote message batch as a worker sends it: WriterBatch
// batches of size bytes each.
func envelopes(size int) *remote.MessageBatch {
	rng := rand.New(rand.NewPCG(1, 2))
	m := &remote.MessageBatch{TypeNames: []string{"actorfeed.ServiceBatch"}}
	for range WriterBatch {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		m.Envelopes = append(m.Envelopes, &remote.MessageEnvelope{MessageData: data, Target: 1, Sender: 2})
	}
	return m
}

// frames cuts a marshalled message into HTTP/2 frames of 16 KiB, as gRPC
// hands a received message to its codec.
func frames(t testing.TB, data mem.BufferSlice) mem.BufferSlice {
	t.Helper()
	whole := data.Materialize()
	data.Free()
	var out mem.BufferSlice
	for len(whole) > 0 {
		n := min(len(whole), 16<<10)
		out = append(out, mem.SliceBuffer(whole[:n]))
		whole = whole[n:]
	}
	return out
}

func TestCodecSpeaksGRPCsProtoCodec(t *testing.T) {
	ours, theirs := codec{new(bufferPool)}, encoding.GetCodecV2("proto")
	require.Equal(t, theirs.Name(), ours.Name())
	for _, size := range []int{10, 784 * 64, 150 << 10} {
		want := envelopes(size)
		for _, c := range []struct {
			name     string
			enc, dec encoding.CodecV2
		}{{"ours to gRPC's", ours, theirs}, {"gRPC's to ours", theirs, ours}, {"ours to ours", ours, ours}} {
			data, err := c.enc.Marshal(want)
			require.NoError(t, err, c.name)
			got := new(remote.MessageBatch)
			require.NoError(t, c.dec.Unmarshal(frames(t, data), got), c.name)
			require.True(t, proto.Equal(want, got), "%s, %d-byte envelopes", c.name, size)
		}
	}
	_, err := ours.Marshal("not a message")
	require.ErrorContains(t, err, "not a protobuf message")
	require.ErrorContains(t, ours.Unmarshal(nil, 7), "not a protobuf message")
}

// TestBufferPoolKeepsLengthsAndCapacities hands buffers back and forth
// across tiers, and buffers of capacities no Get made: every Get has the
// length asked and room for it, whichever buffer the pool gives back.
func TestBufferPoolKeepsLengthsAndCapacities(t *testing.T) {
	p := new(bufferPool)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		n := rng.IntN(1 << (1 + rng.IntN(maxTier+2)))
		b := p.Get(n)
		require.Len(t, *b, n)
		if c := cap(*b); n > 0 && n <= 1<<maxTier {
			require.True(t, c >= n && c < 2*n && c&(c-1) == 0, "Get(%d): capacity %d is not the power of two that fits", n, c)
		}
		(*b) = (*b)[:rng.IntN(n+1)] // gRPC hands back a prefix
		p.Put(b)
		if i%7 == 0 {
			odd := make([]byte, rng.IntN(5000)) // a capacity of no tier
			p.Put(&odd)
		}
	}
	empty := p.Get(0)
	require.Empty(t, *empty)
	p.Put(empty)
}

// BenchmarkCodecUnmarshal decodes what a client receives at 784-byte
// samples in batches of 64: WriterBatch batches in one message, in 16 KiB
// frames; gRPC's own codec, whose pool clears each buffer it hands out, is
// the baseline.
func BenchmarkCodecUnmarshal(b *testing.B) {
	msg := envelopes(784 * 64)
	for _, c := range []struct {
		name  string
		codec encoding.CodecV2
	}{{"grpc", encoding.GetCodecV2("proto")}, {"node", codec{new(bufferPool)}}} {
		b.Run(c.name, func(b *testing.B) {
			data, err := c.codec.Marshal(msg)
			require.NoError(b, err)
			in := frames(b, data)
			b.SetBytes(int64(in.Len()))
			b.ReportAllocs()
			for b.Loop() {
				got := new(remote.MessageBatch)
				if err := c.codec.Unmarshal(in, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
