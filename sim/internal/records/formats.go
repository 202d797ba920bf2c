package records

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
)

// The formats a scenario's files may be in: "" is RecordIO.
const (
	WebDataset = "wds"
	TFRecord   = "tfrecord"
	// Megatron is a Megatron-LM indexed dataset (PREFIX.bin and
	// PREFIX.idx) read as packed samples of SeqLen+1 tokens: sample r of
	// file f begins with token Token(f, r).
	Megatron = "megatron"
)

// SeqLen is the seq_len a scenario's token corpora are read with.
const SeqLen = 3

// Token is the first token of sample r of token corpus f: the corpus is
// the tokens Value(f, 0), Value(f, 0)+1, ..., and sample r begins at its
// r*SeqLen-th.
func Token(f, r int) int64 { return Value(f, 0) + int64(r*SeqLen) }

// Suffix is the file name ending of format's files.
func Suffix(format string) string {
	switch format {
	case WebDataset:
		return ".tar"
	case TFRecord:
		return ".tfrecord"
	case Megatron:
		return ".bin"
	}
	return ".recordio"
}

// Entry is the file list entry that reads path, a file of format: a
// TFRecord file's names its features (a ragged one's steps are any
// number of values, which the first record, of one step, would not say).
func Entry(format, path string, ragged bool) string {
	if format == Megatron {
		return fmt.Sprintf("megatron(seq_len=%d):%s", SeqLen, path)
	}
	if format != TFRecord {
		return path
	}
	if ragged {
		return "tfrecord(id=int64,steps=int64[]):" + path
	}
	return "tfrecord(id=int64,label=int64):" + path
}

// WriteAs writes file f of records records to path in format, Value
// first: in RecordIO as Write does (chunks of at most chunk bytes); as a
// WebDataset shard of samples NNNNNN.id and NNNNNN.inx (the label) or,
// ragged, NNNNNN.txt (1 to 3 bytes); as TFRecord Examples of id and label
// or, ragged, steps (1 to 3 values).
func WriteAs(format, path string, f, records, chunk int, ragged bool) error {
	var b bytes.Buffer
	switch format {
	case "":
		return Write(path, f, records, chunk, ragged)
	case WebDataset:
		if err := writeShard(&b, f, records, ragged); err != nil {
			return err
		}
	case TFRecord:
		if err := writeTFRecord(&b, f, records, ragged); err != nil {
			return err
		}
	case Megatron:
		return writeMegatron(path, f, records)
	default:
		return fmt.Errorf("records: no format %q", format)
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(b.Bytes())
		return err
	})
}

func writeShard(b *bytes.Buffer, f, records int, ragged bool) error {
	tw := tar.NewWriter(b)
	member := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o444, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for r := range records {
		key := fmt.Sprintf("%06d", r)
		if err := member(key+".id", strconv.AppendInt(nil, Value(f, r), 10)); err != nil {
			return err
		}
		second, data := ".inx", strconv.AppendInt(nil, int64(r%10), 10)
		if ragged {
			second, data = ".txt", bytes.Repeat([]byte{'x'}, 1+r%3)
		}
		if err := member(key+second, data); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeTFRecord(b *bytes.Buffer, f, records int, ragged bool) error {
	w := tfrecord.NewWriter(b)
	for r := range records {
		var x tfrecord.Example
		x.Int64("id", Value(f, r))
		if ragged {
			x.Int64("steps", make([]int64, 1+r%3)...)
		} else {
			x.Int64("label", int64(r%10))
		}
		if err := w.Write(x.Marshal()); err != nil {
			return err
		}
	}
	return nil
}

// writeMegatron writes token corpus f of records samples as a Megatron-LM
// indexed dataset of one document, int32 tokens: path (the .bin) and its
// .idx. One document keeps every epoch's packing the same, so that a
// sample's tokens say which sample it is.
func writeMegatron(path string, f, records int) error {
	n := records*SeqLen + 1
	bin := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(bin[4*i:], uint32(Value(f, 0)+int64(i)))
	}
	idx := []byte("MMIDIDX\x00\x00")
	idx = binary.LittleEndian.AppendUint64(idx, 1) // version
	idx = append(idx, 4)                           // int32
	idx = binary.LittleEndian.AppendUint64(idx, 1) // sequences
	idx = binary.LittleEndian.AppendUint64(idx, 2) // document indices: 0 and 1
	idx = binary.LittleEndian.AppendUint32(idx, uint32(n))
	idx = binary.LittleEndian.AppendUint64(idx, 0) // the sequence's first byte
	idx = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(idx, 0), 1)
	for p, data := range map[string][]byte{path: bin, strings.TrimSuffix(path, ".bin") + ".idx": idx} {
		if err := atomicfile.Write(p, func(w io.Writer) error {
			_, err := w.Write(data)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
