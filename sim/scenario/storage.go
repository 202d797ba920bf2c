package scenario

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/actorfeed/actorfeed/tensor"
)

// storage is an actors.Storage over ordinary memory that checks its use:
// every block freed once, never one it did not give, and no device
// stepping a batch whose storage was freed or is not its own.
type storage struct {
	mu     sync.Mutex
	blocks map[*byte]*block
	errors []string
}

type block struct {
	size  int
	freed int
}

func newStorage() *storage { return &storage{blocks: map[*byte]*block{}} }

func (s *storage) Alloc(size int) ([]byte, error) {
	words := make([]uint64, (size+7)/8) // 8-byte aligned, as Storage promises
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), size)
	s.mu.Lock()
	s.blocks[unsafe.SliceData(b)] = &block{size: size}
	s.mu.Unlock()
	return b, nil
}

func (s *storage) Free(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	blk, ok := s.blocks[unsafe.SliceData(b)]
	switch {
	case !ok || blk.size != len(b):
		s.errors = append(s.errors, fmt.Sprintf("storage: Free of %d bytes Alloc did not give", len(b)))
	case blk.freed > 0:
		s.errors = append(s.errors, fmt.Sprintf("storage: a block of %d bytes freed twice", blk.size))
	default:
		blk.freed++
	}
}

// stepped checks a batch a device steps: every slot's data is a live block.
func (s *storage) stepped(slots tensor.Slots) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range slots {
		data := t.Bytes()
		if len(data) == 0 {
			continue
		}
		blk, ok := s.blocks[unsafe.SliceData(data)]
		switch {
		case !ok:
			s.errors = append(s.errors, fmt.Sprintf("storage: slot %d of a stepped batch is not in the devices' storage", i))
		case blk.freed > 0:
			s.errors = append(s.errors, fmt.Sprintf("storage: slot %d of a stepped batch was freed", i))
		}
	}
}

// violations are the misuses seen, and, once the pipeline closed, the
// blocks it did not free.
func (s *storage) violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.errors
	leaked := 0
	for _, blk := range s.blocks {
		if blk.freed == 0 {
			leaked++
		}
	}
	if leaked > 0 {
		out = append(out, fmt.Sprintf("storage: %d of %d blocks not freed after Close", leaked, len(s.blocks)))
	}
	return out
}
