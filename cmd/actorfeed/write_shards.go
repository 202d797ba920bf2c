package main

import (
	"archive/tar"
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/actorfeed/actorfeed/internal/atomicfile"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/readers/tfrecord"
	"github.com/actorfeed/actorfeed/tensor"
)

// sampleFormat is a format write writes: its suffix, and how a shard of it
// is started at a path.
type sampleFormat struct {
	suffix string
	create func(path string) (sampleShard, error)
}

var sampleFormats = map[string]sampleFormat{
	"wds":      {".tar", newTarSamples},
	"tfrecord": {".tfrecord", newTFRecordSamples},
	"recordio": {".recordio", newRecordIOSamples},
}

// sampleShard is a shard being written to its temporary file.
type sampleShard interface {
	add(s inputSample) error
	size() int64   // bytes written so far
	commit() error // ends the shard and renames it into place
	discard()      // removes it
}

// pending is a shard's temporary file, buffered, counting its bytes.
type pending struct {
	f *renameio.PendingFile
	w *bufio.Writer
	n int64
}

func newPending(path string) (*pending, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	return &pending{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (p *pending) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	return n, err
}

func (p *pending) size() int64 { return p.n }

func (p *pending) commit() error {
	if err := p.w.Flush(); err != nil {
		p.f.Cleanup()
		return err
	}
	return p.f.CloseAtomicallyReplace()
}

func (p *pending) discard() { p.f.Cleanup() }

// tarSamples is a WebDataset shard: a sample's fields are its members,
// KEY.NAME, their bytes as given (the Python writer encodes them as the
// webdataset library does).
type tarSamples struct {
	*pending
	tw *tar.Writer
}

func newTarSamples(path string) (sampleShard, error) {
	p, err := newPending(path)
	if err != nil {
		return nil, err
	}
	return &tarSamples{pending: p, tw: tar.NewWriter(p)}, nil
}

func (t *tarSamples) add(s inputSample) error {
	if s.Key == "" || strings.ContainsAny(s.Key, "/.") {
		return fmt.Errorf("key %q: a WebDataset key is not empty and holds no '/' or '.' (its members are KEY.FIELD)", s.Key)
	}
	for _, f := range s.Fields {
		if f.Kind != "bytes" || f.Name == "" || strings.Contains(f.Name, "/") {
			return fmt.Errorf("field %q of kind %s: a WebDataset field is bytes, named by a non-empty extension without '/'", f.Name, f.Kind)
		}
		h := &tar.Header{Name: s.Key + "." + f.Name, Mode: 0o444, Size: f.Len, Typeflag: tar.TypeReg}
		if err := t.tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := t.tw.Write(f.data); err != nil {
			return err
		}
	}
	return nil
}

func (t *tarSamples) commit() error {
	if err := t.tw.Close(); err != nil {
		t.discard()
		return err
	}
	return t.pending.commit()
}

// tfrecordSamples is a TFRecord file: a sample is a tf.train.Example of
// its fields, bytes as a bytes feature of one value, int64 and float as
// lists.
type tfrecordSamples struct {
	*pending
	w *tfrecord.Writer
}

func newTFRecordSamples(path string) (sampleShard, error) {
	p, err := newPending(path)
	if err != nil {
		return nil, err
	}
	return &tfrecordSamples{pending: p, w: tfrecord.NewWriter(p)}, nil
}

func (t *tfrecordSamples) add(s inputSample) error {
	var x tfrecord.Example
	for _, f := range s.Fields {
		switch {
		case f.Name == "":
			return fmt.Errorf("a field without a name")
		case f.Kind == "bytes":
			x.Bytes(f.Name, f.data)
		case f.Kind == "int64" && f.Len%8 == 0:
			v := make([]int64, f.Len/8)
			for i := range v {
				v[i] = int64(binary.LittleEndian.Uint64(f.data[8*i:]))
			}
			x.Int64(f.Name, v...)
		case f.Kind == "float" && f.Len%4 == 0:
			v := make([]float32, f.Len/4)
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(f.data[4*i:]))
			}
			x.Float(f.Name, v...)
		default:
			return fmt.Errorf("field %q: kind %s of %d bytes: a TFRecord feature is bytes, int64 (8 bytes a value) or float (4)", f.Name, f.Kind, f.Len)
		}
	}
	return t.w.Write(x.Marshal())
}

// recordioSamples is a RecordIO file: a sample is a tensor record of one
// instance, its fields its slots in their order: an array of shape S as
// [1, S...] of its dtype, bytes as a uint8 sequence, int64 and float
// lists of n values as [1, n]; a batch of them stacks the instances.
type recordioSamples struct {
	*pending
	w   *recordio.Writer
	rec []byte
}

func newRecordIOSamples(path string) (sampleShard, error) {
	p, err := newPending(path)
	if err != nil {
		return nil, err
	}
	w, err := recordio.NewWriter(p, recordio.WriterOptions{})
	if err != nil {
		p.discard()
		return nil, err
	}
	return &recordioSamples{pending: p, w: w}, nil
}

func (r *recordioSamples) add(s inputSample) error {
	slots := make(tensor.Slots, len(s.Fields))
	for i, f := range s.Fields {
		t, err := fieldTensor(f)
		if err != nil {
			return fmt.Errorf("field %q: %w", f.Name, err)
		}
		slots[i] = t
	}
	var err error
	if r.rec, err = tensor.AppendEncode(r.rec[:0], slots); err != nil {
		return err
	}
	return r.w.Write(r.rec)
}

// fieldTensor is a field as a RecordIO slot.
func fieldTensor(f inputField) (tensor.LoDTensor, error) {
	switch f.Kind {
	case "bytes":
		t, err := tensor.FromBytes(tensor.Uint8, tensor.Shape{len(f.data)}, f.data)
		if err != nil {
			return tensor.LoDTensor{}, err
		}
		return tensor.NewLoDTensor(t, tensor.LoD{{0, len(f.data)}})
	case "int64", "float", "array":
		dt, shape := map[string]tensor.DType{"int64": tensor.Int64, "float": tensor.Float32}[f.Kind], tensor.Shape(f.Shape)
		if f.Kind == "array" {
			var err error
			if dt, err = tensor.ParseDType(f.DType); err != nil {
				return tensor.LoDTensor{}, err
			}
		} else {
			shape = tensor.Shape{int(f.Len) / dt.Size()}
		}
		shape = append(tensor.Shape{1}, shape...) // one instance
		t, err := tensor.FromBytes(dt, shape, f.data)
		if err != nil {
			return tensor.LoDTensor{}, fmt.Errorf("%v%v of %d bytes: %w", dt, shape, f.Len, err)
		}
		return tensor.LoDTensor{Tensor: t}, nil
	}
	return tensor.LoDTensor{}, fmt.Errorf("kind %q: want bytes, int64, float or array", f.Kind)
}

func (r *recordioSamples) commit() error {
	if err := r.w.Close(); err != nil {
		r.discard()
		return err
	}
	return r.pending.commit()
}
