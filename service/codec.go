package service

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// codec is gRPC's proto codec on the node's buffer pool. gRPC's own codec
// takes its buffers from the process-wide default pool whatever pool the
// connection was given (only experimental.SetDefaultBufferPool, at init,
// changes it for the whole process), so the node forces this one on its
// server and its dials. Its name is gRPC's proto codec's, and so is the
// wire format: a peer with gRPC's codec reads it.
type codec struct {
	pool *bufferPool
}

var _ encoding.CodecV2 = codec{}

// Marshal encodes v into a buffer of the pool, which gRPC returns to it
// once written.
func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("service: gRPC codec: %T is not a protobuf message", v)
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true} // Size just cached the sizes
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

// Unmarshal decodes data, joined into one buffer of the pool when it came
// in several frames, into v.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("service: gRPC codec: %T is not a protobuf message", v)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// Name is gRPC's proto codec's: peers see the same content type.
func (codec) Name() string { return "proto" }

// bufferPool is the node's gRPC buffer pool: one sync.Pool for every power
// of two up to 1<<maxTier bytes, and one of larger buffers of any size,
// whose buffers are handed out as they were left. gRPC's own pools clear a
// buffer's whole capacity before handing it out; the remote packs up to
// WriterBatch batches into one message, so a client cleared a buffer of
// many batches for every message it read, and a worker every buffer it
// marshalled into (the cost: docs/performance.md). gRPC writes every byte of a buffer it gets
// before it reads it (a frame read into it, a message marshalled or copied
// into it), so the old bytes are never seen; its transport's own write and
// read buffers come from pools that do not clear them either. Above
// 1<<maxTier, a power of two could waste almost as much again as a batch
// of large samples holds: those buffers are of the size asked.
type bufferPool struct {
	tiers [maxTier + 1]sync.Pool // tier i holds buffers of capacity 1<<i
	large sync.Pool              // buffers above 1<<maxTier
}

// maxTier is the largest power of two's exponent: 1 MiB.
const maxTier = 20

var _ mem.BufferPool = (*bufferPool)(nil)

// Get returns a buffer of length n: of capacity n rounded up to a power of
// two up to 1<<maxTier, of n at least above.
func (p *bufferPool) Get(n int) *[]byte {
	if n <= 0 {
		b := []byte{}
		return &b
	}
	tier := bits.Len(uint(n - 1)) // the least i with 1<<i >= n
	if tier > maxTier {
		if pb, ok := p.large.Get().(*[]byte); ok && cap(*pb) >= n {
			*pb = (*pb)[:n]
			return pb
		} // a smaller one is dropped: batch sizes change slowly
		b := make([]byte, n)
		return &b
	}
	if pb, ok := p.tiers[tier].Get().(*[]byte); ok {
		*pb = (*pb)[:n]
		return pb
	}
	b := make([]byte, n, 1<<tier)
	return &b
}

// Put keeps buf for a later Get. gRPC hands back only what Get gave out;
// a buffer up to 1<<maxTier whose capacity is no power of two is dropped.
func (p *bufferPool) Put(buf *[]byte) {
	c := cap(*buf)
	switch {
	case c > 1<<maxTier:
		p.large.Put(buf)
	case c > 0 && c&(c-1) == 0:
		p.tiers[bits.TrailingZeros(uint(c))].Put(buf)
	}
}
