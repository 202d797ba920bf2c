// Package oracle runs the ecosystem's own readers beside actorfeed's for
// differential tests: Python's tarfile, grouped into samples as the
// webdataset library groups them; TFRecord files read with
// python3-crc32c and python3-protobuf; images decoded by Pillow; token
// corpora written by NumPy as Megatron-LM and llm.c write them. One
// Debian python3 process serves a test's (or a fuzz worker's) requests
// over pipes (oracle.py). Only tests import it.
package oracle

import (
	"bufio"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

//go:embed oracle.py
var script string

// Python is Debian's interpreter, which has the packages the oracle needs
// (the first python3 on PATH may be another).
const Python = "/usr/bin/python3"

// Oracle is a running oracle process. It is safe for concurrent use.
type Oracle struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	dead error // why it was killed
}

// answerWithin bounds an answer.
const answerWithin = 20 * time.Second

// Start starts an oracle that ends with the test. Without Debian's
// python3-pil, python3-crc32c and python3-protobuf a test fails under CI
// (which installs them) and skips elsewhere.
func Start(tb testing.TB) *Oracle {
	tb.Helper()
	o, err := start()
	need(tb, err)
	tb.Cleanup(o.close)
	return o
}

// need fails tb under CI, and skips it elsewhere, when the oracle could
// not start.
func need(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("the oracle: %v (CI installs python3-pil, python3-crc32c, python3-protobuf)", err)
	}
	tb.Skipf("the oracle: %v", err)
}

var (
	shared    *Oracle
	sharedErr error
	once      sync.Once
)

// Shared is one oracle for the process, for a fuzz target's workers: it
// ends when the process does (its stdin closes with it).
func Shared(tb testing.TB) *Oracle {
	tb.Helper()
	once.Do(func() { shared, sharedErr = start() })
	need(tb, sharedErr)
	return shared
}

func start() (*Oracle, error) {
	if err := exec.Command(Python, "-c", "import PIL, crc32c, google.protobuf").Run(); err != nil {
		return nil, fmt.Errorf("%s cannot import PIL, crc32c and google.protobuf: %w", Python, err)
	}
	cmd := exec.Command(Python, "-c", script)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Oracle{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

func (o *Oracle) close() {
	o.in.Close()
	o.cmd.Wait()
}

// ask sends op and data and decodes the answer's header into head,
// returning its payload.
func (o *Oracle) ask(op string, data []byte, head any) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead != nil {
		return nil, o.dead
	}
	// An oracle that does not answer is killed: the input is reported,
	// rather than the test hanging.
	timer := time.AfterFunc(answerWithin, func() { o.cmd.Process.Kill() })
	defer func() {
		if !timer.Stop() {
			o.dead = fmt.Errorf("the oracle gave no answer to a %s request of %d bytes within %v", op, len(data), answerWithin)
		}
	}()
	for _, frame := range [][]byte{[]byte(op), data} {
		if err := binary.Write(o.in, binary.LittleEndian, uint32(len(frame))); err != nil {
			return nil, err
		}
		if _, err := o.in.Write(frame); err != nil {
			return nil, err
		}
	}
	h, err := o.frame()
	if err != nil {
		return nil, err
	}
	payload, err := o.frame()
	if err != nil {
		return nil, err
	}
	return payload, json.Unmarshal(h, head)
}

func (o *Oracle) frame() ([]byte, error) {
	var n uint32
	if err := binary.Read(o.out, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("the oracle: %w", err)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(o.out, b)
	return b, err
}

// MegatronWrite is an indexed dataset of documents (each a list of
// sequences of tokens) with tokens of dtype (a Megatron-LM type name,
// "uint16"), written by NumPy as Megatron-LM's builder writes it: the
// .idx's bytes and the .bin's.
func (o *Oracle) MegatronWrite(dtype string, documents [][][]int64) (idx, bin []byte, err error) {
	params, err := json.Marshal(map[string]any{"dtype": dtype, "documents": documents})
	if err != nil {
		return nil, nil, err
	}
	var head struct {
		Idx   int    `json:"idx"`
		Error string `json:"error"`
	}
	payload, err := o.ask("megatron-write", params, &head)
	switch {
	case err != nil:
		return nil, nil, err
	case head.Error != "":
		return nil, nil, fmt.Errorf("the oracle's writer: %s", head.Error)
	}
	return payload[:head.Idx], payload[head.Idx:], nil
}

// WriteIndexed writes MegatronWrite's dataset of documents as PREFIX.idx
// and PREFIX.bin, failing tb on an error.
func (o *Oracle) WriteIndexed(tb testing.TB, prefix, dtype string, documents [][][]int64) {
	tb.Helper()
	idx, bin, err := o.MegatronWrite(dtype, documents)
	if err == nil {
		err = os.WriteFile(prefix+".idx", idx, 0o644)
	}
	if err == nil {
		err = os.WriteFile(prefix+".bin", bin, 0o644)
	}
	if err != nil {
		tb.Fatalf("the oracle's indexed dataset %s: %v", prefix, err)
	}
}

// LLMCWrite is an llm.c token file of tokens for model ("gpt-2": uint16,
// "llama-3": uint32), written by NumPy as llm.c's write_datafile writes
// it.
func (o *Oracle) LLMCWrite(model string, tokens []int64) ([]byte, error) {
	params, err := json.Marshal(map[string]any{"model": model, "tokens": tokens})
	if err != nil {
		return nil, err
	}
	var head struct {
		Error string `json:"error"`
	}
	payload, err := o.ask("llmc-write", params, &head)
	if err == nil && head.Error != "" {
		err = fmt.Errorf("the oracle's writer: %s", head.Error)
	}
	return payload, err
}

// Sample is a WebDataset sample as webdataset reads it: its key and its
// fields' bytes by extension.
type Sample struct {
	Key    string
	Fields map[string][]byte
}

// Tar is the samples webdataset makes of the shard in data. On tarfile's
// or webdataset's error it is the samples whole before it, and partial,
// when there is one, the sample being read when it came, which webdataset
// would not hand out.
func (o *Oracle) Tar(data []byte) (samples []Sample, partial *Sample, err error) {
	type sample struct {
		Key    string           `json:"key"`
		Fields map[string]hexed `json:"fields"`
	}
	var head struct {
		Samples []sample `json:"samples"`
		Partial []sample `json:"partial"`
		Error   string   `json:"error"`
	}
	if _, err := o.ask("tar", data, &head); err != nil {
		return nil, nil, err
	}
	conv := func(s sample) Sample {
		out := Sample{Key: s.Key, Fields: map[string][]byte{}}
		for ext, b := range s.Fields {
			out.Fields[ext] = b
		}
		return out
	}
	for _, s := range head.Samples {
		samples = append(samples, conv(s))
	}
	if len(head.Partial) > 0 {
		p := conv(head.Partial[0])
		partial = &p
	}
	if head.Error != "" {
		return samples, partial, fmt.Errorf("tarfile: %s", head.Error)
	}
	return samples, nil, nil
}

// Feature is a tf.train.Feature as protobuf reads it: its kind ("bytes",
// "float", "int64", "none") and values (bytes, float32 bits, int64).
type Feature struct {
	Kind   string
	Bytes  [][]byte
	Ints   []int64
	Floats []uint32
}

// Record is a TFRecord record as Python reads it: its features, or why
// it was not read (its data failed its checksum, or is no Example).
type Record struct {
	Features map[string]Feature
	Err      string
}

// TFRecord is each record as python3-crc32c and python3-protobuf read
// it, up to damage to the file's framing (a length or its checksum),
// and then the error.
func (o *Oracle) TFRecord(data []byte) ([]Record, error) {
	var head struct {
		Records []struct {
			Features map[string][2]json.RawMessage `json:"features"`
			Error    string                        `json:"error"`
		} `json:"records"`
		Error string `json:"error"`
	}
	if _, err := o.ask("tfrecord", data, &head); err != nil {
		return nil, err
	}
	out := make([]Record, len(head.Records))
	for i, r := range head.Records {
		out[i].Err = r.Error
		if r.Error != "" {
			continue
		}
		out[i].Features = map[string]Feature{}
		for name, kv := range r.Features {
			f, err := feature(kv)
			if err != nil {
				return nil, err
			}
			out[i].Features[name] = f
		}
	}
	if head.Error != "" {
		return out, fmt.Errorf("python: %s", head.Error)
	}
	return out, nil
}

// feature decodes a feature's [kind, values].
func feature(kv [2]json.RawMessage) (Feature, error) {
	var f Feature
	if err := json.Unmarshal(kv[0], &f.Kind); err != nil {
		return f, err
	}
	var err error
	switch f.Kind {
	case "bytes":
		var hs []hexed
		err = json.Unmarshal(kv[1], &hs)
		for _, h := range hs {
			f.Bytes = append(f.Bytes, h)
		}
	case "float":
		err = json.Unmarshal(kv[1], &f.Floats)
	case "int64":
		err = json.Unmarshal(kv[1], &f.Ints)
	}
	return f, err
}

// WriteTFRecord is a TFRecord file of records written by protobuf and
// crc32c: an implementation independent of actorfeed's.
func (o *Oracle) WriteTFRecord(records []map[string]Feature) ([]byte, error) {
	var in []map[string][2]any
	for _, r := range records {
		m := map[string][2]any{}
		for name, f := range r {
			switch f.Kind {
			case "bytes":
				hs := make([]string, len(f.Bytes))
				for i, b := range f.Bytes {
					hs[i] = hex.EncodeToString(b)
				}
				m[name] = [2]any{f.Kind, hs}
			case "float":
				m[name] = [2]any{f.Kind, f.Floats}
			case "int64":
				m[name] = [2]any{f.Kind, f.Ints}
			}
		}
		in = append(in, m)
	}
	data, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return o.made("tfrecord-write", data, "python")
}

// Image is the image in data decoded by Pillow and converted to RGB
// (convert("RGB"), as torchvision's loaders do): w x h pixels of 3 bytes,
// row by row; or Pillow's error.
func (o *Oracle) Image(data []byte) (w, h int, rgb []byte, err error) {
	var head struct {
		W, H  int
		Error string
	}
	payload, err := o.ask("image", data, &head)
	if err != nil {
		return 0, 0, nil, err
	}
	if head.Error != "" {
		return 0, 0, nil, fmt.Errorf("pillow: %s", head.Error)
	}
	return head.W, head.H, payload, nil
}

// Picture describes an image for Encode to write: its Pillow mode (L,
// LA, RGB, RGBA, CMYK, P), size, format (JPEG, PNG), and a JPEG's
// quality, chroma subsampling (0 4:4:4, 1 4:2:2, 2 4:2:0) and
// progressive scan; a palette's colours and transparent entry.
type Picture struct {
	Mode        string `json:"mode"`
	W           int    `json:"w"`
	H           int    `json:"h"`
	Format      string `json:"format"`
	Seed        uint64 `json:"seed"`
	Quality     int    `json:"quality,omitempty"`
	Subsampling int    `json:"subsampling"`
	Progressive bool   `json:"progressive,omitempty"`
	Colors      int    `json:"colors,omitempty"`
	Transparent *int   `json:"transparency,omitempty"`
}

// Encode is the image p describes, written by Pillow.
func (o *Oracle) Encode(p Picture) ([]byte, error) {
	params, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return o.made("encode", params, "pillow")
}

// made asks op of data for a file the oracle makes: its bytes, or the
// error of the maker (python, pillow) that failed.
func (o *Oracle) made(op string, data []byte, maker string) ([]byte, error) {
	var head struct{ Error string }
	b, err := o.ask(op, data, &head)
	if err == nil && head.Error != "" {
		err = fmt.Errorf("%s: %s", maker, head.Error)
	}
	return b, err
}

// hexed is bytes given as hex.
type hexed []byte

func (h *hexed) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	out, err := hex.DecodeString(s)
	*h = out
	return err
}
