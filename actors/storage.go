package actors

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/actorfeed/actorfeed/tensor"
)

// Storage is memory the batch stage assembles batches in
// (Devices.Storage): memory a device copies from as it is, such as
// page-locked ("pinned") host memory that a GPU reads by DMA. The batch
// stage copies each sample's bytes into it once, the one copy it always
// makes, so a batch reaches the device with no staging copy (PyTorch's
// pin_memory makes one more, on a thread of its own). Storage is
// recycled: a device's stepped batch goes back to the batch stage, and
// Free is called only for storage the pipeline stops using.
type Storage interface {
	// Alloc returns size bytes, 8-byte aligned, for the data of one slot
	// of a batch. An error fails the pipeline, naming it.
	Alloc(size int) ([]byte, error)
	// Free takes back storage Alloc returned, once nothing reads it.
	Free(b []byte)
}

// storagePool is a pipeline's Storage, and every block it gave that has
// not been freed: the pipeline frees them when it ends.
type storagePool struct {
	st   Storage
	mu   sync.Mutex
	live map[*byte][]byte
	err  error // the first Alloc error
}

func newStoragePool(st Storage) *storagePool {
	return &storagePool{st: st, live: map[*byte][]byte{}}
}

// alloc is a tensor.Alloc over the pool's Storage; it returns nil (and
// keeps the error) when Alloc fails or gives what cannot be used.
func (p *storagePool) alloc(size int) []byte {
	b, err := p.st.Alloc(size)
	switch {
	case err == nil && len(b) < size:
		err = fmt.Errorf("it returned %d bytes for %d", len(b), size)
	case err == nil && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0:
		err = fmt.Errorf("it returned storage that is not 8-byte aligned")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if b != nil {
			p.st.Free(b)
		}
		if p.err == nil {
			p.err = fmt.Errorf("actors: batch storage: Alloc(%d): %w", size, err)
		}
		return nil
	}
	p.live[unsafe.SliceData(b)] = b
	return b
}

// failed is the first Alloc error, if any.
func (p *storagePool) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// free gives back the storage of every slot of s that the pool gave.
func (p *storagePool) free(s tensor.Slots) {
	for _, t := range s {
		p.freeBytes(t.Bytes())
	}
}

func (p *storagePool) freeBytes(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	orig, ok := p.live[unsafe.SliceData(b)]
	delete(p.live, unsafe.SliceData(b))
	p.mu.Unlock()
	if ok {
		p.st.Free(orig)
	}
}

// unused frees the slots of recycled whose storage out does not use: a
// batch of another size was made in fresh storage instead.
func (p *storagePool) unused(recycled, out tensor.Slots) {
	for s, t := range recycled {
		old := t.Bytes()
		if cap(old) == 0 || s < len(out) && unsafe.SliceData(out[s].Bytes()) == unsafe.SliceData(old) {
			continue
		}
		p.freeBytes(old)
	}
}

// close frees every block still given out; the pipeline has stopped, so
// nothing reads them, unless a step that would not stop (ErrAbandoned)
// still holds one: then nothing is freed, since which it holds is unknown.
func (p *storagePool) close(abandoned bool) {
	p.mu.Lock()
	live := p.live
	p.live = map[*byte][]byte{}
	p.mu.Unlock()
	if abandoned {
		return
	}
	for _, b := range live {
		p.st.Free(b)
	}
}
