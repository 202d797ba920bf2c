package vision

import (
	"errors"
	"fmt"
	"image"
	"runtime"
	"sync"

	"github.com/ebitengine/purego"
)

// LibTurboJPEG is libjpeg-turbo's TurboJPEG library (Debian's
// libturbojpeg0), loaded at run time, without cgo, as actors/cuda loads
// the CUDA driver.
const LibTurboJPEG = "libturbojpeg.so.0"

// ErrNoTurboJPEG is returned where LibTurboJPEG cannot be loaded.
var ErrNoTurboJPEG = errors.New("vision: libturbojpeg.so.0 cannot be loaded (apt-get install libturbojpeg0)")

// TurboJPEG's pixel format and flags (turbojpeg.h, libjpeg-turbo 2.x).
const (
	tjpfRGBA             = 7
	tjpfCMYK             = 11
	tjflagStopOnWarning  = 8192  // a corrupt stream is an error, not a warning
	tjflagLimitScans     = 32768 // a progressive image of over 500 scans is an error
	tjflagAccurateDCT    = 4096
	turboDecompressFlags = tjflagStopOnWarning | tjflagLimitScans | tjflagAccurateDCT
	// TJCS_CMYK and TJCS_YCCK, a JPEG's colour spaces that TurboJPEG does
	// not convert to RGB ("Unsupported color conversion request").
	tjcsCMYK = 3
	tjcsYCCK = 4
)

// turbo is the part of the TurboJPEG API that decodes. A handle is not
// safe for concurrent use: each is taken from handles for one call, and
// put back, or destroyed when handles is full (a sync.Pool would drop
// handles without destroying them).
type turbo struct {
	tjInitDecompress    func() uintptr
	tjDecompressHeader3 func(h uintptr, buf *byte, size uint64, w, hgt, subsamp, cs *int32) int32
	tjDecompress2       func(h uintptr, buf *byte, size uint64, dst *byte, w, pitch, hgt, format, flags int32) int32
	tjGetErrorStr2      func(h uintptr) string
	tjDestroy           func(h uintptr) int32
	handles             chan uintptr
}

var (
	turboOnce sync.Once
	turboLib  *turbo
	turboErr  error
)

// loadTurbo loads LibTurboJPEG once a process.
func loadTurbo() (*turbo, error) {
	turboOnce.Do(func() {
		lib, err := purego.Dlopen(LibTurboJPEG, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			turboErr = fmt.Errorf("%w: %v", ErrNoTurboJPEG, err)
			return
		}
		t := &turbo{handles: make(chan uintptr, 64)}
		for _, f := range []struct {
			fn   any
			name string
		}{{&t.tjInitDecompress, "tjInitDecompress"}, {&t.tjDecompressHeader3, "tjDecompressHeader3"},
			{&t.tjDecompress2, "tjDecompress2"}, {&t.tjGetErrorStr2, "tjGetErrorStr2"}, {&t.tjDestroy, "tjDestroy"}} {
			if _, err := purego.Dlsym(lib, f.name); err != nil {
				turboErr = fmt.Errorf("%w: %s: %v", ErrNoTurboJPEG, f.name, err)
				return
			}
			purego.RegisterLibFunc(f.fn, lib, f.name)
		}
		turboLib = t
	})
	return turboLib, turboErr
}

// TurboJPEG reports whether LibTurboJPEG can be loaded, and why not.
func TurboJPEG() error {
	_, err := loadTurbo()
	return err
}

// call runs fn with a handle; a failure is ErrImage with TurboJPEG's
// words, and its handle is destroyed, not reused: one that failed mid
// stream failed the next image given to it.
func (t *turbo) call(fn func(h uintptr) int32) error {
	var h uintptr
	select {
	case h = <-t.handles:
	default:
		if h = t.tjInitDecompress(); h == 0 {
			return fmt.Errorf("vision: tjInitDecompress failed")
		}
	}
	// TurboJPEG keeps some errors' words in thread-local storage, not in
	// the handle: read them on the thread that failed, or they say "No
	// error".
	runtime.LockOSThread()
	if fn(h) != 0 {
		err := fmt.Errorf("%w: %s", ErrImage, t.tjGetErrorStr2(h))
		runtime.UnlockOSThread()
		t.tjDestroy(h)
		return err
	}
	runtime.UnlockOSThread()
	select {
	case t.handles <- h:
	default:
		t.tjDestroy(h)
	}
	return nil
}

// header is a JPEG's size, and whether TurboJPEG makes RGB of it (not of
// a CMYK or YCCK one, which decodeCMYK decodes); ErrImage when data is no
// JPEG TurboJPEG reads.
func (t *turbo) header(data []byte) (w, h int, rgb bool, err error) {
	if len(data) == 0 {
		return 0, 0, false, fmt.Errorf("%w: no bytes", ErrImage)
	}
	var w32, h32, sub, cs int32
	err = t.call(func(hd uintptr) int32 {
		return t.tjDecompressHeader3(hd, &data[0], uint64(len(data)), &w32, &h32, &sub, &cs)
	})
	return int(w32), int(h32), cs != tjcsCMYK && cs != tjcsYCCK, err
}

// decode decodes data at eighths/8 of its size (libjpeg's DCT scaling)
// into an RGBA image of the scaled size, in dst's memory when it holds
// it, which it returns.
func (t *turbo) decode(data []byte, w, h, eighths int, dst *image.RGBA) (*image.RGBA, error) {
	sw, sh := scaled(w, eighths), scaled(h, eighths)
	dst = reuse(dst, image.Rect(0, 0, sw, sh))
	err := t.call(func(hd uintptr) int32 {
		return t.tjDecompress2(hd, &data[0], uint64(len(data)), &dst.Pix[0], int32(sw), int32(4*sw), int32(sh), tjpfRGBA, turboDecompressFlags)
	})
	return dst, err
}

// decodeCMYK is decode for a CMYK or YCCK JPEG, which TurboJPEG makes
// CMYK of, as the file holds it; its RGB is then made as Pillow makes it:
// the values inverted (Adobe's convention, which Pillow assumes: "CMYK;I"),
// then cmykToRGB.
func (t *turbo) decodeCMYK(data []byte, w, h, eighths int, dst *image.RGBA) (*image.RGBA, error) {
	sw, sh := scaled(w, eighths), scaled(h, eighths)
	dst = reuse(dst, image.Rect(0, 0, sw, sh))
	err := t.call(func(hd uintptr) int32 {
		return t.tjDecompress2(hd, &data[0], uint64(len(data)), &dst.Pix[0], int32(sw), int32(4*sw), int32(sh), tjpfCMYK, turboDecompressFlags)
	})
	if err != nil {
		return dst, err
	}
	for i := 0; i+4 <= len(dst.Pix); i += 4 {
		p := dst.Pix[i : i+4 : i+4]
		cmykToRGB(p, 255-int(p[0]), 255-int(p[1]), 255-int(p[2]), 255-int(p[3]))
	}
	return dst, nil
}

// scaled is TJSCALED: dim at eighths/8, rounded up.
func scaled(dim, eighths int) int { return (dim*eighths + 7) / 8 }
