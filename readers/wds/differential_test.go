package wds_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/wds"
	"github.com/actorfeed/actorfeed/tensor"
)

// read is a shard read by one of actorfeed's paths: its samples up to the
// first error, and the error (nil: to its end).
type read struct {
	keys  []string // nil for the spans' path, which reads no key
	names []string
	slots []tensor.Slots
	err   error
}

// readByTar reads b through archive/tar (wds.Reader).
func readByTar(b []byte) read {
	r := wds.NewReader(bytes.NewReader(b), "fuzz.tar")
	var out read
	for {
		key, s, err := r.Next()
		if errors.Is(err, io.EOF) {
			out.names = r.Fields()
			return out
		}
		if err != nil {
			out.names, out.err = r.Fields(), err
			return out
		}
		out.keys, out.slots = append(out.keys, key), append(out.slots, s)
	}
}

// readBySpans reads b by its spans, as a raw shard is read.
func readBySpans(b []byte) read {
	sp, err := wds.ScanSpans(bytes.NewReader(b), int64(len(b)), "fuzz.tar")
	out := read{err: err}
	if sp == nil {
		return out
	}
	out.names = sp.Fields()
	r := wds.NewSpanReader(bytes.NewReader(b), int64(len(b)), "fuzz.tar", sp)
	for {
		s, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			out.err = err
			return out
		}
		out.slots = append(out.slots, s)
	}
}

// agreeWithTarfile requires actorfeed's two paths through shard b and
// webdataset's (Python's tarfile) to agree sample by sample, or
// actorfeed to refuse by name where they part: every sample actorfeed
// hands out is tarfile's at that place, key, fields and bytes; a shard
// actorfeed reads to its end is one tarfile reads to its end, with no
// sample more.
func agreeWithTarfile(t *testing.T, o *oracle.Oracle, b []byte) {
	t.Helper()
	py, partial, perr := o.Tar(b)
	for _, ours := range []read{readByTar(b), readBySpans(b)} {
		want := py
		if ours.err != nil {
			var fe *format.Error
			require.ErrorAs(t, ours.err, &fe, "a refusal names the shard")
			require.Equal(t, "fuzz.tar", fe.File)
		}
		if partial != nil && len(ours.slots) > len(py) {
			// tarfile failed past the members of the sample it was
			// reading (at the next one, or a header or padding cut after
			// it): webdataset would not hand that sample out, actorfeed
			// may, whole, exactly as tarfile read it.
			want = append(slices.Clone(py), *partial)
		}
		if ours.err == nil {
			// An empty file is an empty shard to actorfeed, and tarfile's
			// "empty file": neither has a sample.
			require.Len(t, want, len(ours.slots), "tarfile found other samples (%v)", perr)
		}
		require.GreaterOrEqual(t, len(want), len(ours.slots), "actorfeed handed out samples tarfile does not find (%v)", perr)
		for i, s := range ours.slots {
			sameSample(t, i, want[i], ours.keys, ours.names, s)
		}
	}
}

// sameSample requires actorfeed's sample i (its key when keys is set, its
// fields' names and slots) to be tarfile's want.
func sameSample(t *testing.T, i int, want oracle.Sample, keys, names []string, s tensor.Slots) {
	t.Helper()
	if keys != nil {
		require.Equal(t, want.Key, keys[i], "sample %d's key", i)
	}
	exts := make([]string, 0, len(want.Fields))
	for ext := range want.Fields {
		exts = append(exts, ext)
	}
	slices.Sort(exts)
	require.Equal(t, exts, names, "sample %d's fields", i)
	for f, ext := range exts {
		field, err := wds.Field(ext, want.Fields[ext])
		require.NoError(t, err, "sample %d's %s: tarfile's bytes do not parse, but actorfeed's did", i, ext)
		require.True(t, field.Equal(s[f]), "sample %d's %s: %q from tarfile", i, ext, truncated(want.Fields[ext]))
	}
}

func truncated(b []byte) []byte { return b[:min(len(b), 40)] }

// hostileShards are shards whose members are what writers rarely write,
// by name: members tar reads as files (contiguous, sparse), and members
// that are not fields (directories, links, names without a dot); long
// names in GNU and PAX records; a sample's field given twice; a sample of
// other fields than the first.
func hostileShards(t testing.TB) map[string][]byte {
	t.Helper()
	build := func(hs ...tar.Header) []byte {
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		for i, h := range hs {
			data := []byte(fmt.Sprint(i % 10))
			if h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeCont {
				h.Size = int64(len(data))
			}
			require.NoError(t, w.WriteHeader(&h))
			if h.Size > 0 {
				_, err := w.Write(data)
				require.NoError(t, err)
			}
		}
		require.NoError(t, w.Close())
		return b.Bytes()
	}
	reg := func(name string) tar.Header { return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
	long := "d/" + string(bytes.Repeat([]byte("x"), 150))
	out := map[string][]byte{
		"contiguous": build(reg("a.cls"), tar.Header{Name: "a.txt", Typeflag: tar.TypeCont, Mode: 0o644}, reg("b.cls"), reg("b.txt")),
		"not fields": build(tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}, reg("d/a.cls"), tar.Header{Name: "d/a.txt", Typeflag: tar.TypeSymlink, Linkname: "x"},
			reg("d/a.txt"), reg("d/README"), reg("d/.hidden"), reg("d/b.cls"), reg("d/b.txt")),
		"long names":     build(reg(long+"1.cls"), reg(long+"1.txt"), reg(long+"2.cls"), reg(long+"2.txt")),
		"field twice":    build(reg("a.cls"), reg("a.txt"), reg("a.txt"), reg("b.cls"), reg("b.txt")),
		"other fields":   build(reg("a.cls"), reg("a.txt"), reg("b.cls"), reg("b.json")),
		"upper case":     build(reg("a.CLS"), reg("a.Txt"), reg("b.cls"), reg("b.txt")),
		"dots in field":  build(reg("a.seg.png"), reg("a.cls"), reg("b.seg.png"), reg("b.cls")),
		"split a sample": build(reg("a.cls"), reg("b.cls"), reg("a.txt")),
	}
	for name, b := range misreadNumbers(t) {
		out[name] = b
	}
	paths, err := filepath.Glob("testdata/sparse/*.tar")
	require.NoError(t, err)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out["sparse "+filepath.Base(p)] = b
	}
	return out
}

// misreadNumbers are shards with a header's number that Python's tarfile
// and archive/tar read differently: tarfile reads a numeric field up to
// its first NUL, tar past leading NULs, so a NUL before the digits makes
// the field 0 to one and the digits to the other; and a base-256 marker
// tarfile does not know. In a member's size (ustar and v7 headers), a pax
// header's size and a checksum; and in a v7 header's device number, which
// tar does not read and tarfile refuses.
func misreadNumbers(t testing.TB) map[string][]byte {
	t.Helper()
	var plain, pax bytes.Buffer
	for _, c := range []struct {
		w    *bytes.Buffer
		name string
	}{{&plain, "a"}, {&pax, "d/" + strings.Repeat("x", 120)}} {
		w := tar.NewWriter(c.w)
		for i, ext := range []string{".bin", ".txt", ".bin", ".txt"} {
			name := fmt.Sprintf("%s%d%s", c.name, i/2, ext)
			require.NoError(t, w.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}))
			_, err := w.Write([]byte("123"))
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
	}
	require.Equal(t, byte(tar.TypeXHeader), pax.Bytes()[156], "the long name is a pax header's")
	v7 := bytes.Clone(plain.Bytes())
	for off := 0; off+512 <= len(v7); off += 512 {
		if string(v7[off+257:off+262]) == "ustar" { // a v7 header has no magic
			clear(v7[off+257 : off+512])
		}
	}
	fixChecksums(v7, false)
	// nulFirst puts a NUL before the digits of the n-byte field at off of
	// block blk, the digits read the same by tar.
	nulFirst := func(b []byte, blk, off, n int) []byte {
		b = bytes.Clone(b)
		f := b[blk*512+off : blk*512+off+n]
		copy(f[1:], bytes.Clone(f[:n-1]))
		f[0] = 0
		fixChecksums(b, false)
		return b
	}
	patch := func(b []byte, blk, off int, value string) []byte {
		b = bytes.Clone(b)
		copy(b[blk*512+off:], value)
		fixChecksums(b, false)
		return b
	}
	checksumNul := bytes.Clone(plain.Bytes())
	fixChecksums(checksumNul, false)
	copy(checksumNul[1024+148:1024+156], append([]byte{0}, checksumNul[1024+148:1024+155]...))
	return map[string][]byte{
		"size after a NUL":          nulFirst(plain.Bytes(), 0, 124, 12),
		"v7 size after a NUL":       nulFirst(v7, 2, 124, 12),
		"pax header size after NUL": nulFirst(pax.Bytes(), 0, 124, 12),
		"size after spaces, a NUL":  patch(plain.Bytes(), 2, 124, "  \x00000000003"),
		"checksum after a NUL":      checksumNul,
		"base-256 tarfile refuses":  patch(plain.Bytes(), 0, 108, "\x81\x00\x00\x00\x00\x00\x00\x00"),
		"v7 device number":          patch(v7, 2, 329, "garbage\x00"),
	}
}

// The shards people write, and shards of what they rarely write, read
// alike by actorfeed and webdataset (or are refused by name).
func TestShardsAgreeWithTarfile(t *testing.T) {
	o := oracle.Start(t)
	for name, b := range writtenShards(t, 12) {
		t.Run(name, func(t *testing.T) { agreeWithTarfile(t, o, b) })
	}
	for name, b := range hostileShards(t) {
		t.Run(name, func(t *testing.T) { agreeWithTarfile(t, o, b) })
	}
}

// FuzzShardsAgainstTarfile mutates shards (their headers' checksums kept
// right, with fix) and requires actorfeed and webdataset's reading to
// agree, or actorfeed to refuse by name, as TestShardsAgreeWithTarfile
// does. The inputs that found a defect are kept in testdata/fuzz.
func FuzzShardsAgainstTarfile(f *testing.F) {
	for _, b := range writtenShards(f, 2) {
		f.Add(trimmed(b), uint8(0))
		f.Add(trimmed(b), uint8(1))
	}
	for _, b := range hostileShards(f) {
		f.Add(b, uint8(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, fix uint8) {
		if fix%3 != 0 {
			fixChecksums(b, fix%3 == 2)
		}
		agreeWithTarfile(t, oracle.Shared(t), b)
	})
}

// webdataset's base_plus_ext, whose semantics Go's regexp shares
// (leftmost-first, as Python's re).
var basePlusExt = regexp.MustCompile(`^((?:.*/|)[^.]+)[.]([^/]*)$`)

// FuzzSplit: a member's key and field are what webdataset's pattern makes
// of its name.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"a.cls", "d/a.cls", "d/.hidden", "d/x/.hidden", "d.x/.hidden", ".hidden", "a.", "a.b.c", "x.y/a.cls",
		"d/a./b.cls", "a//.x", "/.x", "README", "d/", "a.CLS"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		key, ext, ok := wds.Split(name)
		m := basePlusExt.FindStringSubmatch(name)
		require.Equal(t, m != nil, ok, "%q", name)
		if ok {
			require.Equal(t, m[1], key, "%q", name)
			require.Equal(t, strings.ToLower(m[2]), ext, "%q", name)
		}
	})
}
