package wds

import (
	"archive/tar"
	"strings"

	"github.com/actorfeed/actorfeed/readers/format"
)

// Python's tarfile, which webdataset reads shards with, and archive/tar
// read some headers differently. Where they would, a shard is refused by
// name rather than read otherwise than webdataset reads it
// (FuzzShardsAgainstTarfile).

// tarfileAgrees says what in the headers tar just read for h (the bytes
// the counter recorded: a pax or long-name header's first, then h's own)
// Python's tarfile reads otherwise: a number in any of them, or a regular
// file's name.
func (r *Reader) tarfileAgrees(h *tar.Header) error {
	hs := r.src.headers
	if len(hs) == maxHeaderBytes {
		return format.Corrupt("more than %d bytes of headers before it", maxHeaderBytes)
	}
	for off := 0; off+block <= len(hs); {
		b := hs[off : off+block]
		if err := numbersAgree(b, headerKind(b[156])); err != nil {
			return err
		}
		switch b[156] {
		case tar.TypeXHeader, tar.TypeGNULongName, tar.TypeGNULongLink: // records for the header after
			size, _ := number(b[124:136])
			off += block + int((size+block-1)/block*block)
			continue
		}
		regular := h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeCont
		if regular && !isSparse(h) && !nameAgrees(h, b) {
			return format.Corrupt("its header's prefix field holds %q, which Python's tarfile (so webdataset) reads as part of the name and tar, in a header of this format, as nothing: its name cannot be trusted",
				cString(b[345:500]))
		}
		return nil
	}
	return nil
}

// numericFields are the numeric fields of a header block that tarfile
// reads, whatever its format.
var numericFields = [...]struct {
	name     string
	from, to int
}{{"mode", 100, 108}, {"uid", 108, 116}, {"gid", 116, 124}, {"size", 124, 136}, {"mtime", 136, 148},
	{"checksum", 148, 156}, {"devmajor", 329, 337}, {"devminor", 337, 345}}

// numbersAgree says which numeric field of header block b, which is
// header (its header, or a header before it), tarfile reads otherwise than
// tar: a base-256 number of a marker it does not know (it knows 0x80 and
// 0xff, tar any byte of the high bit), or an octal one parseOctal does not
// read alike. tarfile refuses a header with a field it cannot read, even
// one tar does not read (a v7 header's device numbers).
func numbersAgree(b []byte, header string) error {
	for _, f := range numericFields {
		v := b[f.from:f.to]
		switch {
		case v[0] == 0x80 || v[0] == 0xff:
		case v[0]&0x80 != 0:
			return format.Corrupt("the %s field of %s is a base-256 number of a kind Python's tarfile (so webdataset) refuses", f.name, header)
		default:
			if _, ok := parseOctal(v); !ok {
				return format.Corrupt("the %s field %q of %s is no number that tar and Python's tarfile (so webdataset) read alike: the member cannot be trusted", f.name, v, header)
			}
		}
	}
	return nil
}

// headerKind names a header block of type typ as tarfileAgrees walks a
// member's headers.
func headerKind(typ byte) string {
	switch typ {
	case tar.TypeXHeader:
		return "the pax header before it"
	case tar.TypeGNULongName, tar.TypeGNULongLink:
		return "the long-name header before it"
	}
	return "its header"
}

// number reads a numeric field that numbersAgree let through: octal, or
// a positive base-256 number; false past an int64.
func number(b []byte) (int64, bool) {
	if b[0] != 0x80 {
		return parseOctal(b)
	}
	var v int64
	for _, c := range b[1:] {
		if v > 1<<54 {
			return 0, false
		}
		v = v<<8 | int64(c)
	}
	return v, true
}

// nameAgrees says whether archive/tar and Python's tarfile read the same
// name in the member header b that h was read from. tarfile prepends a
// header's prefix field (bytes 345-500) to its name whatever its format,
// but for the GNU types L, K and S; tar only in ustar and pax headers
// (and star's shorter one). A name from a long-name record (pax path, GNU
// L) is read by both alike.
func nameAgrees(h *tar.Header, b []byte) bool {
	name := cString(b[:100])
	ours := name
	switch magic := string(b[257:265]); {
	case magic[:6] == "ustar\x00" && string(b[508:512]) == "tar\x00":
		if p := cString(b[345:476]); p != "" {
			ours = p + "/" + name
		}
	case magic[:6] == "ustar\x00":
		if p := cString(b[345:500]); p != "" {
			ours = p + "/" + name
		}
	}
	if ours != strings.TrimSuffix(h.Name, "/") && ours != h.Name {
		return true // a long-name record named it
	}
	theirs := name
	if p := cString(b[345:500]); p != "" && h.Typeflag != tar.TypeGNULongName && h.Typeflag != tar.TypeGNULongLink && h.Typeflag != tar.TypeGNUSparse {
		theirs = p + "/" + name
	}
	return theirs == ours
}
