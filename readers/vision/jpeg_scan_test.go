package vision_test

import "encoding/binary"

// A sound JPEG is one an 8-bit image's encoder could have written.
// libjpeg reads some damaged baseline streams without a warning: a run of
// zeros past a block's last coefficient is written to the last one, its
// value's bits read; Go's decoder stops the block there without reading
// them, and every block after it decodes from the wrong bits. Coefficients
// an 8-bit image cannot have overflow libjpeg-turbo's 16-bit SIMD
// dequantization and not Go's 32-bit one. So what Go's decoder makes of a
// stream libjpeg took silently is Pillow's only where the stream is sound,
// which soundBaseline checks by walking its entropy-coded data.

// huffman is a table of DHT: the codes of each length (canonical order)
// and their symbols.
type huffman struct {
	counts  [17]int
	symbols []byte
}

// jpegScan walks a baseline JPEG's scans.
type jpegScan struct {
	data    []byte
	pos     int // the next entropy-coded byte
	bits    uint32
	n       int // bits held in bits
	huff    [2][4]*huffman
	quant   [4][64]int
	comps   []jpegComp
	w, h    int
	restart int
}

type jpegComp struct {
	id, h, v, tq int
	dc, ac, pred int
}

// soundBaseline says whether data is a baseline (sequential, Huffman,
// 8-bit) JPEG whose every block holds coefficients an 8-bit image can
// have: Huffman codes and categories in range, no run past a block's end,
// every dequantized coefficient within 2048 plus its quantizer's rounding,
// all of every scan's blocks present. A progressive or otherwise other
// JPEG is not known sound.
func soundBaseline(data []byte) bool {
	s := &jpegScan{data: data}
	defer func() { _ = recover() }() // a short segment: not sound
	return s.walk()
}

func (s *jpegScan) walk() bool {
	p := 2
	for p+1 < len(s.data) {
		if s.data[p] != 0xff {
			return false
		}
		m := s.data[p+1]
		if m == 0xff {
			p++
			continue
		}
		if m == 0xd9 {
			return s.comps != nil
		}
		n := int(binary.BigEndian.Uint16(s.data[p+2:]))
		seg := s.data[p+4 : p+2+n]
		switch {
		case m == 0xc4:
			if !s.tables(seg) {
				return false
			}
		case m == 0xdb:
			s.quantTables(seg)
		case m == 0xdd:
			s.restart = int(binary.BigEndian.Uint16(seg))
		case m == 0xc0 || m == 0xc1:
			if !s.frame(seg) {
				return false
			}
		case m >= 0xc2 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			return false // progressive, lossless or arithmetic-coded
		case m == 0xda:
			s.pos = p + 2 + n
			if !s.scan(seg) {
				return false
			}
			p = s.pos
			continue
		}
		p += 2 + n
	}
	return false
}

func (s *jpegScan) tables(seg []byte) bool {
	for len(seg) > 0 {
		class, id := int(seg[0]>>4), int(seg[0]&15)
		if class > 1 || id > 3 {
			return false
		}
		t := &huffman{}
		total := 0
		for l := 1; l <= 16; l++ {
			t.counts[l] = int(seg[l])
			total += t.counts[l]
		}
		if total > 256 {
			return false
		}
		t.symbols = seg[17 : 17+total]
		s.huff[class][id] = t
		seg = seg[17+total:]
	}
	return true
}

func (s *jpegScan) quantTables(seg []byte) {
	for len(seg) > 0 {
		wide, id := seg[0]>>4 != 0, int(seg[0]&3)
		seg = seg[1:]
		for k := range 64 {
			if wide {
				s.quant[id][k], seg = int(binary.BigEndian.Uint16(seg)), seg[2:]
			} else {
				s.quant[id][k], seg = int(seg[0]), seg[1:]
			}
		}
	}
}

func (s *jpegScan) frame(seg []byte) bool {
	if seg[0] != 8 || s.comps != nil {
		return false
	}
	s.h, s.w = int(binary.BigEndian.Uint16(seg[1:])), int(binary.BigEndian.Uint16(seg[3:]))
	for i := range int(seg[5]) {
		c := seg[6+3*i:]
		s.comps = append(s.comps, jpegComp{id: int(c[0]), h: int(c[1] >> 4), v: int(c[1] & 15), tq: int(c[2] & 3)})
	}
	return s.w > 0 && s.h > 0
}

// scan walks the blocks of the scan whose header is seg, its
// entropy-coded data from s.pos, leaving s.pos past them.
func (s *jpegScan) scan(seg []byte) bool {
	var in []*jpegComp
	for i := range int(seg[0]) {
		id, tables := int(seg[1+2*i]), seg[2+2*i]
		for k := range s.comps {
			if c := &s.comps[k]; c.id == id {
				c.dc, c.ac = int(tables>>4), int(tables&15)
				if c.dc > 3 || c.ac > 3 || s.huff[0][c.dc] == nil || s.huff[1][c.ac] == nil {
					return false
				}
				in = append(in, c)
			}
		}
	}
	if len(in) != int(seg[0]) || len(in) == 0 {
		return false
	}
	hmax, vmax := 1, 1
	for _, c := range s.comps {
		hmax, vmax = max(hmax, c.h), max(vmax, c.v)
	}
	across, down := ceilDiv(s.w, 8*hmax), ceilDiv(s.h, 8*vmax)
	if len(in) == 1 {
		c := in[0]
		across, down = ceilDiv(ceilDiv(s.w*c.h, hmax), 8), ceilDiv(ceilDiv(s.h*c.v, vmax), 8)
	}
	s.n = 0
	for _, c := range in {
		c.pred = 0
	}
	for m := range across * down {
		if m > 0 && s.restart > 0 && m%s.restart == 0 && !s.restartMarker(in) {
			return false
		}
		for _, c := range in {
			blocks := c.h * c.v
			if len(in) == 1 {
				blocks = 1
			}
			for range blocks {
				if !s.block(c) {
					return false
				}
			}
		}
	}
	s.n = 0
	return true
}

// restartMarker reads the RSTn marker due after a restart interval.
func (s *jpegScan) restartMarker(in []*jpegComp) bool {
	s.n = 0
	if s.pos+1 >= len(s.data) || s.data[s.pos] != 0xff || s.data[s.pos+1]&0xf8 != 0xd0 {
		return false
	}
	s.pos += 2
	for _, c := range in {
		c.pred = 0
	}
	return true
}

// block walks one block of component c.
func (s *jpegScan) block(c *jpegComp) bool {
	q := &s.quant[c.tq]
	cat, ok := s.decode(s.huff[0][c.dc])
	if !ok || cat > 11 {
		return false
	}
	diff, ok := s.receive(int(cat))
	c.pred += diff
	if !ok || !fits(c.pred, q[0]) {
		return false
	}
	for k := 1; k < 64; k++ {
		rs, ok := s.decode(s.huff[1][c.ac])
		if !ok {
			return false
		}
		run, cat := int(rs>>4), int(rs&15)
		if cat == 0 && run != 15 {
			return true // the end of the block
		}
		k += run
		if k > 63 || cat > 10 {
			return false
		}
		if cat > 0 {
			v, ok := s.receive(cat)
			if !ok || !fits(v, q[k]) {
				return false
			}
		}
	}
	return true
}

// fits says whether coefficient v, dequantized by q, is one an 8-bit
// image's DCT can have: at most 2048 (a quarter of 64 samples of at most
// 128), and q more for its encoder's rounding.
func fits(v, q int) bool {
	return max(v, -v)*q <= 2048+q
}

func (s *jpegScan) bit() (int, bool) {
	if s.n == 0 {
		if s.pos >= len(s.data) {
			return 0, false
		}
		b := s.data[s.pos]
		if b == 0xff {
			if s.pos+1 >= len(s.data) || s.data[s.pos+1] != 0 {
				return 0, false // a marker: the data ends early
			}
			s.pos++
		}
		s.pos++
		s.bits, s.n = uint32(b), 8
	}
	s.n--
	return int(s.bits>>s.n) & 1, true
}

// decode reads one symbol of table t.
func (s *jpegScan) decode(t *huffman) (byte, bool) {
	code, first, index := 0, 0, 0
	for l := 1; l <= 16; l++ {
		b, ok := s.bit()
		if !ok {
			return 0, false
		}
		code = code<<1 | b
		if code-first < t.counts[l] {
			return t.symbols[index+code-first], true
		}
		index += t.counts[l]
		first = (first + t.counts[l]) << 1
	}
	return 0, false
}

// receive reads a value of cat bits, extended to its sign.
func (s *jpegScan) receive(cat int) (int, bool) {
	v := 0
	for range cat {
		b, ok := s.bit()
		if !ok {
			return 0, false
		}
		v = v<<1 | b
	}
	if cat > 0 && v < 1<<(cat-1) {
		v -= 1<<cat - 1
	}
	return v, true
}

func ceilDiv(a, b int) int {
	return (a + b - 1) / b
}
