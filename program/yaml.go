package program

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/actorfeed/actorfeed/internal/yamlline"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/readers/order"
)

// Spec is a program written in YAML (docs/programs.md): a startup program
// that creates the readers, and what to do with them: a main program to
// loop, or device actors to feed.
type Spec struct {
	Startup Program
	// Main, when set, is looped by Scope.Loop for Passes passes.
	Main   *Program
	Passes int
	// Devices, when set, feeds a reader to device actors (what the CLI's
	// run does).
	Devices *DeviceSpec
	// Shard, when set, is this process's rank among the ranks that read
	// the data set together (actors.Options.Shard).
	Shard *actors.Shard
	// Service, when set, runs the stages before the double buffer on
	// worker nodes (actors.Options.Service; docs/distributed.md).
	Service *actors.Service
}

// DeviceSpec says which reader feeds how many devices, and for how long a
// simulated step takes.
type DeviceSpec struct {
	Reader string
	N      int
	Step   time.Duration
	Passes int
}

// The YAML form. Every level refuses unknown fields, so a misspelt key is
// an error naming it.
type specYAML struct {
	Startup []opYAML     `yaml:"startup"`
	Main    *mainYAML    `yaml:"main"`
	Devices *deviceYAML  `yaml:"devices"`
	Shard   *shardYAML   `yaml:"shard"`
	Service *serviceYAML `yaml:"service"`
}

type serviceYAML struct {
	Workers        []string `yaml:"workers"`
	Credit         int      `yaml:"credit"`
	Lease          string   `yaml:"lease"`
	WaitForWorkers string   `yaml:"wait_for_workers"`
}

type shardYAML struct {
	Rank      int    `yaml:"rank"`
	World     int    `yaml:"world"`
	Remainder string `yaml:"remainder"`
}

type mainYAML struct {
	Passes *int     `yaml:"passes"`
	Ops    []opYAML `yaml:"ops"`
}

type deviceYAML struct {
	Reader string `yaml:"reader"`
	N      *int   `yaml:"n"`
	Step   string `yaml:"step"`
	Passes *int   `yaml:"passes"`
}

type opYAML struct {
	Op    string         `yaml:"op"`
	In    string         `yaml:"in"`
	Out   stringList     `yaml:"out"`
	Attrs map[string]any `yaml:"attrs"`
	line  int
}

// UnmarshalYAML keeps the op's line for errors, and refuses unknown keys
// (a custom unmarshaler does not inherit the decoder's KnownFields).
func (o *opYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i]; k.Value {
			case "op", "in", "out", "attrs":
			default:
				return fmt.Errorf("line %d: field %s is not an op field (op, in, out, attrs)", k.Line, k.Value)
			}
		}
	}
	type plain opYAML
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*o = opYAML(p)
	o.line = n.Line
	return nil
}

// stringList accepts one name or a list of names.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*l = []string{s}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*l = list
	return nil
}

// SpecError is a YAML spec that does not parse or does not make sense; it
// names where (the line, and the op when there is one) and what was
// expected.
type SpecError struct {
	Line int
	Op   *OpError // the op at fault, if any
	Msg  string
}

func (e *SpecError) Error() string {
	if e.Op != nil {
		return fmt.Sprintf("line %d: %v", e.Line, e.Op)
	}
	if e.Line > 0 {
		return fmt.Sprintf("program: spec, line %d: %s", e.Line, e.Msg)
	}
	return "program: spec: " + e.Msg
}

func (e *SpecError) Unwrap() error {
	if e.Op != nil {
		return e.Op
	}
	return ErrBadProgram
}

// Parse reads a YAML program. It checks the document's shape (unknown
// fields, types) and every op's type, attributes and variables, without
// opening any file.
func Parse(data []byte) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, &SpecError{Msg: fmt.Sprintf("the spec has %d bytes, more than the limit %d", len(data), MaxSpecBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var y specYAML
	if err := dec.Decode(&y); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			return nil, &SpecError{Msg: te.Errors[0]}
		}
		if line, msg := yamlline.Locate(data, err); line > 0 {
			return nil, &SpecError{Msg: fmt.Sprintf("yaml: line %d: %s", line, msg)}
		}
		return nil, &SpecError{Msg: err.Error()}
	}
	if len(y.Startup) == 0 {
		return nil, &SpecError{Msg: "startup: want a list of ops that create readers, got none"}
	}
	if n := len(y.Startup) + len(y.mainOps()); n > MaxOps {
		return nil, &SpecError{Msg: fmt.Sprintf("the spec has %d ops, more than the limit %d", n, MaxOps)}
	}
	s := &Spec{Startup: program(y.Startup), Passes: 1}
	if y.Main != nil {
		s.Main = new(Program)
		*s.Main = program(y.Main.Ops)
		if y.Main.Passes != nil {
			s.Passes = *y.Main.Passes
		}
		if s.Passes < 1 {
			return nil, &SpecError{Msg: fmt.Sprintf("main.passes: want an integer >= 1, got %d", s.Passes)}
		}
	}
	if d := y.Devices; d != nil {
		s.Devices = &DeviceSpec{Reader: d.Reader, N: 1, Passes: 1}
		if d.N != nil {
			s.Devices.N = *d.N
		}
		if d.Passes != nil {
			s.Devices.Passes = *d.Passes
		}
		if s.Devices.N < 1 || s.Devices.N > actors.MaxConcurrency || s.Devices.Passes < 1 || s.Devices.Passes > math.MaxInt32 {
			return nil, &SpecError{Msg: fmt.Sprintf("devices: want n from 1 to %d and passes from 1 to %d, got n %d and passes %d",
				actors.MaxConcurrency, math.MaxInt32, s.Devices.N, s.Devices.Passes)}
		}
		if d.Step != "" {
			step, err := time.ParseDuration(d.Step)
			if err != nil || step < 0 {
				return nil, &SpecError{Msg: fmt.Sprintf("devices.step: want a duration such as 5ms, got %q", d.Step)}
			}
			s.Devices.Step = step
		}
	}
	if sh := y.Shard; sh != nil {
		rem, err := order.ParseRemainder(sh.Remainder)
		if err != nil || sh.World < 1 || sh.World > actors.MaxWorld || sh.Rank < 0 || sh.Rank >= sh.World {
			return nil, &SpecError{Msg: fmt.Sprintf("shard: want 0 <= rank < world <= %d and remainder drop or pad, got rank %d, world %d, remainder %q",
				actors.MaxWorld, sh.Rank, sh.World, sh.Remainder)}
		}
		s.Shard = &actors.Shard{Rank: sh.Rank, World: sh.World, Remainder: rem}
	}
	if y.Service != nil {
		svc, err := y.Service.parse()
		if err != nil {
			return nil, err
		}
		s.Service = svc
	}
	if err := s.check(y); err != nil {
		return nil, err
	}
	return s, nil
}

// Limits on a spec, checked before it is decoded (size) and before its ops
// are checked (count): a program is a few ops; a file of megabytes or
// thousands of ops is a mistake or an attack, and decoding it took memory
// many times its size.
const (
	MaxSpecBytes = 1 << 20
	MaxOps       = 1024
)

// mainOps is the main program's ops, if any.
func (y specYAML) mainOps() []opYAML {
	if y.Main == nil {
		return nil
	}
	return y.Main.Ops
}

// ResolvePaths makes the relative file paths of the startup program's
// file readers (open_files' file_names, create_recordio_file_reader's
// filename) relative to dir, the directory of the spec file, so that a spec
// means the same files from wherever it is run. A format: prefix is kept;
// an object's URL is left as it is.
func (s *Spec) ResolvePaths(dir string) {
	resolve := func(v any) any {
		e, ok := v.(string)
		if !ok {
			return v
		}
		name, path, err := readers.ParseEntry(e)
		if err != nil || path == "" || filepath.IsAbs(path) || objstore.IsURL(path) {
			return v
		}
		if path = filepath.Join(dir, path); name != "" {
			return name + ":" + path
		}
		return path
	}
	for _, op := range s.Startup.Ops {
		for key, v := range op.Attrs {
			switch {
			case op.Type == "open_files" && key == "file_names":
				if list, ok := v.([]any); ok {
					for i := range list {
						list[i] = resolve(list[i])
					}
				}
			case op.Type == "create_recordio_file_reader" && key == "filename":
				op.Attrs[key] = resolve(v)
			}
		}
	}
}

func program(ops []opYAML) Program {
	p := Program{Ops: make([]Op, len(ops))}
	for i, o := range ops {
		p.Ops[i] = Op{Type: o.Op, In: o.In, Out: o.Out, Attrs: o.Attrs}
	}
	return p
}

// check runs the startup program on a scratch scope (it only records
// chains; no pipeline starts) and checks the main program's and the
// devices' variables against the readers it made.
func (s *Spec) check(y specYAML) error {
	scratch := NewScope(actors.Options{})
	defer scratch.Close()
	scratch.anyMap = true
	for name := range s.feeders() {
		if _, err := scratch.InitFeedQueue(name, 1, nil); err != nil {
			return err
		}
	}
	for i, op := range s.Startup.Ops {
		if op.Type == "read" || op.Type == "has_next" || op.Type == "reset" {
			return &SpecError{Line: y.Startup[i].line, Op: &OpError{Index: i, Op: op.Type, Want: "an op that creates a reader (read, has_next and reset belong in main)"}}
		}
		if err := scratch.runOp(context.Background(), i, op); err != nil {
			var oe *OpError
			if errors.As(err, &oe) {
				return &SpecError{Line: y.Startup[i].line, Op: oe}
			}
			return err
		}
	}
	if s.Main != nil {
		for i, op := range s.Main.Ops {
			oe := checkMainOp(scratch, i, op)
			if oe != nil {
				return &SpecError{Line: y.Main.Ops[i].line, Op: oe}
			}
		}
	}
	if d := s.Devices; d != nil {
		if d.Reader == "" {
			d.Reader = s.Startup.Ops[len(s.Startup.Ops)-1].Out[0]
		}
		if scratch.Reader(d.Reader) == nil {
			return &SpecError{Msg: fmt.Sprintf("devices.reader: want one of the readers the startup program creates (%v), got %q", scratch.Readers(), d.Reader)}
		}
	}
	return nil
}

// checkMainOp checks a main-program op without running it.
func checkMainOp(s *Scope, i int, op Op) *OpError {
	def, ok := ops[op.Type]
	switch {
	case !ok || (op.Type != "read" && op.Type != "has_next" && op.Type != "reset"):
		return &OpError{Index: i, Op: op.Type, Want: "read, has_next or reset"}
	case len(op.Attrs) > 0:
		return &OpError{Index: i, Op: op.Type, Field: "attrs", Want: "no attributes"}
	case s.Reader(op.In) == nil:
		return &OpError{Index: i, Op: op.Type, Field: "in", Want: fmt.Sprintf("one of the readers the startup program creates (%v)", s.Readers()), Got: op.In}
	case def.outs >= 0 && len(op.Out) != def.outs:
		return &OpError{Index: i, Op: op.Type, Field: "out", Want: fmt.Sprintf("%d variable name(s)", def.outs), Got: len(op.Out)}
	case def.outs < 0 && len(op.Out) == 0:
		return &OpError{Index: i, Op: op.Type, Field: "out", Want: "one variable name per slot", Got: 0}
	}
	return nil
}

// feeders lists the feed-queue holders the program reads.
func (s *Spec) feeders() map[string]bool {
	out := map[string]bool{}
	for _, op := range s.Startup.Ops {
		if op.Type == "create_py_array_reader" {
			if name, ok := op.Attrs["feeder_name"].(string); ok {
				out[name] = true
			}
		}
	}
	return out
}

// Feed says what a spec feeds to devices: its devices section, or else
// the reader its main program reads (or the last reader its startup
// program creates) on one device for main's passes.
func (s *Spec) Feed() DeviceSpec {
	if s.Devices != nil {
		return *s.Devices
	}
	last := s.Startup.Ops[len(s.Startup.Ops)-1].Out[0]
	if s.Main == nil {
		return DeviceSpec{Reader: last, N: 1, Passes: 1}
	}
	reader := last
	for _, op := range s.Main.Ops {
		if op.Type == "read" {
			reader = op.In
			break
		}
	}
	return DeviceSpec{Reader: reader, N: 1, Passes: s.Passes}
}

// parse checks the service section: workers given, credit and durations
// in range.
func (y *serviceYAML) parse() (*actors.Service, error) {
	if len(y.Workers) == 0 || y.Credit < 0 || y.Credit > actors.MaxQueue {
		return nil, &SpecError{Msg: fmt.Sprintf("service: want workers (host:port each) and a credit from 0 to %d, got %d workers, credit %d",
			actors.MaxQueue, len(y.Workers), y.Credit)}
	}
	for i, w := range y.Workers {
		if _, _, err := net.SplitHostPort(w); err != nil {
			return nil, &SpecError{Msg: fmt.Sprintf("service.workers[%d]: want host:port, got %q", i, w)}
		}
	}
	svc := &actors.Service{Workers: y.Workers, Credit: y.Credit}
	for _, d := range []struct {
		key, v string
		to     *time.Duration
	}{{"lease", y.Lease, &svc.Lease}, {"wait_for_workers", y.WaitForWorkers, &svc.WaitForWorkers}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return nil, &SpecError{Msg: fmt.Sprintf("service.%s: want a positive duration such as 10s, got %q", d.key, d.v)}
		}
		*d.to = v
	}
	if svc.Lease != 0 && (svc.Lease < actors.MinLease || svc.Lease > actors.MaxLease) {
		return nil, &SpecError{Msg: fmt.Sprintf("service.lease: want %v to %v, got %v", actors.MinLease, actors.MaxLease, svc.Lease)}
	}
	if svc.WaitForWorkers > actors.MaxWaitForWorkers {
		return nil, &SpecError{Msg: fmt.Sprintf("service.wait_for_workers: want up to %v, got %v", actors.MaxWaitForWorkers, svc.WaitForWorkers)}
	}
	return svc, nil
}
