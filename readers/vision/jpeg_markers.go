package vision

import "fmt"

// checkJPEGMarkers walks a JPEG's marker segments from its SOI to its
// first SOS and refuses bytes between segments that are not a marker.
// libjpeg warns of them ("extraneous bytes before marker"), and
// TurboJPEG, stopping at every warning, refuses the image; Go's decoder
// skips them silently and reads whatever marker follows, so a header
// whose bytes were overwritten decoded, there, into other pixels. The
// walk makes Go's decoder refuse what TurboJPEG refuses in a JPEG's
// header, so that the same file gives the same verdict with or without
// libjpeg-turbo. Damage in the entropy-coded data after SOS is not
// found here: JPEG carries no checksum (docs/images.md).
func checkJPEGMarkers(data []byte) error {
	pos := 2 // past SOI
	for {
		if pos >= len(data) {
			return fmt.Errorf("jpeg: the header ends at byte %d before its first scan", len(data))
		}
		if data[pos] != 0xff {
			return fmt.Errorf("jpeg: byte %d is 0x%02x where a marker was due: the header is damaged", pos, data[pos])
		}
		for pos < len(data) && data[pos] == 0xff { // fill bytes may pad a marker
			pos++
		}
		if pos >= len(data) {
			continue // the check above reports the end
		}
		m := data[pos]
		pos++
		switch {
		case m == 0xda: // SOS: the entropy-coded data follows
			return nil
		case m == 0x01 || (m >= 0xd0 && m <= 0xd7): // TEM and RSTn stand alone
			continue
		case m == 0x00 || m == 0xd8 || m == 0xd9:
			return fmt.Errorf("jpeg: marker 0x%02x at byte %d, in the header before the first scan", m, pos-1)
		}
		if pos+2 > len(data) {
			return fmt.Errorf("jpeg: marker 0x%02x at byte %d has no length", m, pos-1)
		}
		n := int(data[pos])<<8 | int(data[pos+1])
		if n < 2 || pos+n > len(data) {
			return fmt.Errorf("jpeg: marker 0x%02x at byte %d says %d bytes, and %d are left", m, pos-1, n, len(data)-pos)
		}
		pos += n
	}
}
