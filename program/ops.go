package program

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

// opDef is what an op accepts.
type opDef struct {
	in    bool     // takes an input variable
	outs  int      // output variables: exactly this many, or -1 for one or more
	attrs []string // the attributes it knows
	run   func(s *Scope, c *opCtx) error
}

// slotAttrs declare a file reader's slots.
var slotAttrs = []string{"shapes", "dtypes", "lod_levels"}

var ops = map[string]opDef{
	"create_recordio_file_reader": {outs: 1, attrs: append([]string{"filename"}, slotAttrs...), run: createFileReader},
	"open_files": {outs: 1, attrs: append([]string{"file_names", "thread_num", "buffer_size", "any_order", "weights", "blend_samples", "weight_phases"}, slotAttrs...),
		run: openFiles},
	"create_random_data_generator": {outs: 1, attrs: []string{"shapes", "lod_levels", "min", "max", "seed"}, run: createRandom},
	"create_py_array_reader":       {outs: 1, attrs: []string{"feeder_name"}, run: createPyArrayReader},
	"create_shuffle_reader":        {in: true, outs: 1, attrs: []string{"buffer_size", "seed"}, run: decorate(shuffleStage)},
	"create_batch_reader":          {in: true, outs: 1, attrs: []string{"batch_size", "drop_last"}, run: decorate(batchStage)},
	"create_double_buffer_reader":  {in: true, outs: 1, attrs: []string{"window", "drop_partial"}, run: decorate(doubleBufferStage)},
	"create_multi_pass_reader":     {in: true, outs: 1, attrs: []string{"pass_num"}, run: decorate(multiPassStage)},
	"create_map_reader":            {in: true, outs: 1, attrs: []string{"map", "workers"}, run: mapReader},
	"read":                         {in: true, outs: -1, run: read},
	"has_next":                     {in: true, outs: 1, run: hasNext},
	"reset":                        {in: true, outs: 0, run: reset},
}

// OpTypes lists the ops a program may use, sorted.
func OpTypes() []string {
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// opCtx is one op being run.
type opCtx struct {
	ctx   context.Context
	index int
	op    Op
	in    *Reader
}

func (c *opCtx) fail(field, want string, got any) *OpError {
	return &OpError{Index: c.index, Op: c.op.Type, Field: field, Want: want, Got: got}
}

func (s *Scope) runOp(ctx context.Context, i int, op Op) error {
	def, ok := ops[op.Type]
	if !ok {
		return &OpError{Index: i, Op: op.Type, Want: "one of " + strings.Join(OpTypes(), ", ")}
	}
	c := &opCtx{ctx: ctx, index: i, op: op}
	for name := range op.Attrs {
		if !slices.Contains(def.attrs, name) {
			want := "no attributes"
			if len(def.attrs) > 0 {
				want = "one of " + strings.Join(def.attrs, ", ")
			}
			return c.fail("attribute "+name, want, nil)
		}
	}
	switch {
	case def.in && op.In == "":
		return c.fail("in", "the name of a reader variable", nil)
	case !def.in && op.In != "":
		return c.fail("in", "nothing (this op creates a reader from attributes)", op.In)
	case def.outs >= 0 && len(op.Out) != def.outs:
		return c.fail("out", fmt.Sprintf("%d variable name(s)", def.outs), len(op.Out))
	case def.outs < 0 && len(op.Out) == 0:
		return c.fail("out", "one variable name per slot", 0)
	}
	for _, name := range op.Out {
		if name == "" {
			return c.fail("out", "non-empty variable names", op.Out)
		}
	}
	if def.in {
		if c.in = s.Reader(op.In); c.in == nil {
			return c.fail("in", "the name of a reader variable", fmt.Sprintf("%q, which is no reader (readers: %s)", op.In, strings.Join(s.Readers(), ", ")))
		}
	}
	return def.run(s, c)
}

// define creates the op's output reader variable.
func (s *Scope) define(c *opCtx, stages []actors.Stage) error {
	name := c.op.Out[0]
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.readers[name]; taken {
		return c.fail("out", "a new variable name", fmt.Sprintf("%q, which is already a reader", name))
	}
	s.readers[name] = &Reader{name: name, stages: stages}
	return nil
}

// ---- file readers ----

func createFileReader(s *Scope, c *opCtx) error {
	path, err := c.str("filename", true)
	if err != nil {
		return err
	}
	slots, err := c.slots()
	if err != nil {
		return err
	}
	return s.define(c, []actors.Stage{actors.Files{Paths: []string{path}, Threads: 1, Slots: slots}})
}

func openFiles(s *Scope, c *opCtx) error {
	names, err := c.strs("file_names")
	if err != nil {
		return err
	}
	// Braces and globs, as run's --data: a shard list need not be spelt out.
	paths, err := readers.Expand(c.ctx, names)
	if err != nil {
		return &OpError{Index: c.index, Op: c.op.Type, Field: "file_names", Want: "paths, globs or brace lists that name files", Err: err}
	}
	threads, err := c.integer("thread_num", 0, 0, "an integer >= 1 (default #cpus; at most the splits, or the files with any_order)")
	if err != nil {
		return err
	}
	buffer, err := c.integer("buffer_size", 0, 0, "an integer >= 1 (default thread_num in the order, 3 * thread_num in any order)")
	if err != nil {
		return err
	}
	anyOrder, err := c.boolean("any_order")
	if err != nil {
		return err
	}
	slots, err := c.slots()
	if err != nil {
		return err
	}
	for i, p := range paths {
		if i%1024 == 0 && c.ctx.Err() != nil { // a list of a million names stops when asked
			return context.Cause(c.ctx)
		}
		if _, _, err := readers.ParseEntry(p); err != nil {
			return &OpError{Index: c.index, Op: c.op.Type, Field: fmt.Sprintf("file_names[%d]", i), Want: "format:path or a path", Got: p, Err: err}
		}
	}
	blend, steps, err := c.blend(len(paths))
	if err != nil {
		return err
	}
	return s.define(c, []actors.Stage{actors.Files{Paths: paths, Threads: threads, Buffer: buffer, AnyOrder: anyOrder, Slots: slots,
		Blend: blend, BlendSteps: steps}})
}

func createRandom(s *Scope, c *opCtx) error {
	shapes, err := c.shapes("shapes", true)
	if err != nil {
		return err
	}
	lo, err := c.float("min", 0)
	if err != nil {
		return err
	}
	hi, err := c.float("max", 1)
	if err != nil {
		return err
	}
	seed, err := c.integer("seed", 0, 0, "an integer >= 0")
	if err != nil {
		return err
	}
	levels, err := c.ints("lod_levels", len(shapes))
	if err != nil {
		return err
	}
	for i, l := range levels {
		if l != 0 {
			return c.fail(fmt.Sprintf("lod_levels[%d]", i), "0 (random data has no LoD)", l)
		}
	}
	opts := readers.RandomOptions{Shapes: shapes, Min: float32(lo), Max: float32(hi), Seed: uint64(seed)}
	if _, err := readers.RandomData(opts); err != nil { // checks shapes and bounds now, not at first read
		return &OpError{Index: c.index, Op: c.op.Type, Field: "shapes, min, max", Want: "concrete shapes of rank >= 2 and min <= max", Err: err}
	}
	name := c.op.Out[0]
	return s.define(c, []actors.Stage{actors.Generator{Name: name, New: func() (readers.Reader, error) { return readers.RandomData(opts) }}})
}

func createPyArrayReader(s *Scope, c *opCtx) error {
	feeder, err := c.str("feeder_name", true)
	if err != nil {
		return err
	}
	s.mu.Lock()
	h := s.queues[feeder]
	s.mu.Unlock()
	if h == nil || h.Queue() == nil {
		return c.fail("feeder_name", "a feed-queue holder initialised with Scope.InitFeedQueue", feeder)
	}
	return s.define(c, []actors.Stage{actors.Queue{Queue: h.Queue()}})
}

// ---- decorators ----

// decorate makes a decorator op: the input reader's chain plus one stage.
func decorate(stage func(c *opCtx) (actors.Stage, error)) func(*Scope, *opCtx) error {
	return func(s *Scope, c *opCtx) error {
		st, err := stage(c)
		if err != nil {
			return err
		}
		last := c.in.stages[len(c.in.stages)-1]
		if _, ok := last.(actors.DoubleBuffer); ok {
			return c.fail("in", "a reader that is not a double buffer (it must be the outermost)", c.op.In)
		}
		return s.define(c, append(slices.Clip(c.in.stages), st))
	}
}

// mapReader is create_map_reader: the map of Scope.Maps named by map, in
// the order (map_readers), or on workers goroutines at once (xmap_readers;
// in the order behind files that read in it).
func mapReader(s *Scope, c *opCtx) error {
	name, err := c.str("map", true)
	if err != nil {
		return err
	}
	fn := s.Maps[name]
	var samples actors.SampleMapFunc
	if fn == nil && s.SampleMaps != nil {
		if samples, err = s.SampleMaps(name); err != nil && !s.anyMap {
			return c.fail("attribute map", fmt.Sprintf("a map this scope knows or can make (%v)", err), name)
		}
	}
	if fn == nil && samples == nil && s.anyMap {
		fn = func(tensor.Slots) (tensor.Slots, error) { return nil, fmt.Errorf("program: map %q is not bound", name) }
	}
	if fn == nil && samples == nil {
		known := slices.Sorted(maps.Keys(s.Maps))
		return c.fail("attribute map", "a map this scope knows ("+strings.Join(known, ", ")+")", name)
	}
	workers, err := c.integer("workers", 0, 0, "an integer >= 0 (0: one at a time, in the order)")
	if err != nil {
		return err
	}
	var st actors.Stage = actors.Map{Fn: fn, Samples: samples, Name: name}
	if workers > 0 {
		st = actors.XMap{Fn: fn, Samples: samples, Name: name, Workers: workers, Ordered: true}
	}
	return decorate(func(*opCtx) (actors.Stage, error) { return st, nil })(s, c)
}

// AutoWindow is the window of a shuffle with buffer_size "auto" over files
// whose records cannot be read by position: DataLoader's shuffle=True
// where a global order cannot be had, at a memory of a few MB for samples
// of a few KB.
const AutoWindow = 4096

// shuffleStage is a shuffle of buffer_size records; with buffer_size
// "all", the global order (actors.Shuffle.Global); with "auto", the global
// order where the files are read by position, else a window of
// AutoWindow records (actors.Shuffle.OrWindow).
func shuffleStage(c *opCtx) (actors.Stage, error) {
	seed, err := c.integer("seed", 0, 0, "an integer >= 0")
	if err != nil {
		return nil, err
	}
	switch c.op.Attrs["buffer_size"] {
	case "all":
		return actors.Shuffle{Global: true, Seed: uint64(seed)}, nil
	case "auto":
		return actors.Shuffle{Global: true, OrWindow: AutoWindow, Seed: uint64(seed)}, nil
	}
	window, err := c.integer("buffer_size", -1, 0, `an integer >= 0, "all" or "auto"`)
	if err != nil {
		return nil, err
	}
	return actors.Shuffle{Window: window, Seed: uint64(seed)}, nil
}

func batchStage(c *opCtx) (actors.Stage, error) {
	size, err := c.integer("batch_size", -1, 1, "an integer >= 1")
	if err != nil {
		return nil, err
	}
	drop, err := c.boolean("drop_last")
	if err != nil {
		return nil, err
	}
	return actors.Batch{Size: size, DropLast: drop}, nil
}

func doubleBufferStage(c *opCtx) (actors.Stage, error) {
	window, err := c.integer("window", 2, 1, "an integer >= 1 (default 2)")
	if err != nil {
		return nil, err
	}
	drop, err := c.boolean("drop_partial")
	if err != nil {
		return nil, err
	}
	return actors.DoubleBuffer{Window: window, DropPartial: drop}, nil
}

func multiPassStage(c *opCtx) (actors.Stage, error) {
	n, err := c.integer("pass_num", -1, 1, "an integer >= 1")
	if err != nil {
		return nil, err
	}
	return actors.MultiPass{Passes: n}, nil
}

// ---- reading ----

func read(s *Scope, c *opCtx) error {
	p, err := s.pull(c.ctx, c.in)
	if err != nil {
		return err
	}
	it, err := p.Next(c.ctx)
	if errors.Is(err, io.EOF) {
		err = ErrEOF
	}
	if err != nil {
		return fmt.Errorf("program: op %d (read %s): %w", c.index, c.op.In, err)
	}
	if len(it.Slots) != len(c.op.Out) {
		return c.fail("out", fmt.Sprintf("one name per slot: the reader gives %d slots", len(it.Slots)), c.op.Out)
	}
	for i, name := range c.op.Out {
		s.set(name, it.Slots[i])
	}
	s.set(c.op.In+"@item", it)
	return nil
}

func hasNext(s *Scope, c *opCtx) error {
	p, err := s.pull(c.ctx, c.in)
	if err != nil {
		return err
	}
	more, err := p.HasNext(c.ctx)
	if err != nil {
		return fmt.Errorf("program: op %d (has_next %s): %w", c.index, c.op.In, err)
	}
	s.set(c.op.Out[0], more)
	return nil
}

func reset(s *Scope, c *opCtx) error {
	p, err := s.pull(c.ctx, c.in)
	if err != nil {
		return err
	}
	if err := p.Reset(); err != nil {
		return fmt.Errorf("program: op %d (reset %s): %w", c.index, c.op.In, err)
	}
	return nil
}

// ---- attributes ----

// str returns a string attribute.
func (c *opCtx) str(name string, required bool) (string, error) {
	v, ok := c.op.Attrs[name]
	if !ok {
		if required {
			return "", c.fail("attribute "+name, "a string", "nothing")
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok || (required && s == "") {
		return "", c.fail("attribute "+name, "a non-empty string", v)
	}
	return s, nil
}

// strs returns a required, non-empty list of strings.
func (c *opCtx) strs(name string) ([]string, error) {
	v, ok := c.op.Attrs[name]
	bad := c.fail("attribute "+name, "a non-empty list of strings", v)
	if !ok {
		bad.Got = "nothing"
		return nil, bad
	}
	var out []string
	switch v := v.(type) {
	case []string:
		out = v
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, bad
			}
			out = append(out, s)
		}
	default:
		return nil, bad
	}
	if len(out) == 0 {
		return nil, bad
	}
	return out, nil
}

// integer returns an integer attribute of at least lo; def is the value
// when it is absent, and def < 0 makes it required.
func (c *opCtx) integer(name string, def, lo int, want string) (int, error) {
	v, ok := c.op.Attrs[name]
	if !ok {
		if def < 0 {
			return 0, c.fail("attribute "+name, want, "nothing")
		}
		return def, nil
	}
	n, ok := asInt(v)
	if !ok || n < lo {
		return 0, c.fail("attribute "+name, want, v)
	}
	return n, nil
}

func asInt(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int64:
		return int(v), true
	case uint64:
		return int(v), v <= math.MaxInt
	case float64:
		return int(v), v == math.Trunc(v) && math.Abs(v) < 1<<53
	}
	return 0, false
}

func (c *opCtx) float(name string, def float64) (float64, error) {
	v, ok := c.op.Attrs[name]
	if !ok {
		return def, nil
	}
	switch v := v.(type) {
	case float64:
		return v, nil
	case float32:
		return float64(v), nil
	}
	if n, ok := asInt(v); ok {
		return float64(n), nil
	}
	return 0, c.fail("attribute "+name, "a number", v)
}

func (c *opCtx) boolean(name string) (bool, error) {
	v, ok := c.op.Attrs[name]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, c.fail("attribute "+name, "true or false", v)
	}
	return b, nil
}

// ints returns a list of integers >= 0 of length n, or n zeros when absent.
func (c *opCtx) ints(name string, n int) ([]int, error) {
	v, ok := c.op.Attrs[name]
	if !ok {
		return make([]int, n), nil
	}
	want := fmt.Sprintf("a list of %d integers >= 0 (one per slot)", n)
	list, ok := asList(v)
	if !ok || len(list) != n {
		return nil, c.fail("attribute "+name, want, v)
	}
	out := make([]int, n)
	for i, x := range list {
		k, ok := asInt(x)
		if !ok || k < 0 {
			return nil, c.fail("attribute "+name, want, v)
		}
		out[i] = k
	}
	return out, nil
}

func asList(v any) ([]any, bool) {
	switch v := v.(type) {
	case []any:
		return v, true
	case []int:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = x
		}
		return out, true
	case []string:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = x
		}
		return out, true
	case []tensor.Shape:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = []int(x)
		}
		return out, true
	case [][]int:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = x
		}
		return out, true
	}
	return nil, false
}

// shapes returns a list of shapes (lists of integers, -1 a wildcard).
func (c *opCtx) shapes(name string, required bool) ([]tensor.Shape, error) {
	v, ok := c.op.Attrs[name]
	if !ok {
		if required {
			return nil, c.fail("attribute "+name, "a list of shapes such as [[-1, 784], [-1, 1]]", "nothing")
		}
		return nil, nil
	}
	bad := c.fail("attribute "+name, "a list of shapes such as [[-1, 784], [-1, 1]]", v)
	list, ok := asList(v)
	if !ok || len(list) == 0 {
		return nil, bad
	}
	out := make([]tensor.Shape, len(list))
	for i, x := range list {
		dims, ok := asList(x)
		if !ok {
			return nil, bad
		}
		shape := make(tensor.Shape, len(dims))
		for k, d := range dims {
			n, ok := asInt(d)
			if !ok || n < -1 {
				return nil, c.fail(fmt.Sprintf("attribute %s[%d]", name, i), "dimensions >= 0 or -1", x)
			}
			shape[k] = n
		}
		out[i] = shape
	}
	return out, nil
}

// slots returns the declared slots of a file reader: shapes, with dtypes
// and lod_levels of the same length (nil when no shapes are declared).
func (c *opCtx) slots() ([]readers.SlotSpec, error) {
	shapes, err := c.shapes("shapes", false)
	if err != nil || shapes == nil {
		if err == nil && (c.op.Attrs["dtypes"] != nil || c.op.Attrs["lod_levels"] != nil) {
			return nil, c.fail("attribute shapes", "shapes wherever dtypes or lod_levels are given", "nothing")
		}
		return nil, err
	}
	slots := make([]readers.SlotSpec, len(shapes))
	for i, sh := range shapes {
		slots[i].Shape = sh
	}
	if v, ok := c.op.Attrs["dtypes"]; ok {
		want := fmt.Sprintf("a list of %d dtype names (one per shape: %s)", len(shapes), strings.Join(dtypeNames(), ", "))
		list, ok := asList(v)
		if !ok || len(list) != len(shapes) {
			return nil, c.fail("attribute dtypes", want, v)
		}
		for i, x := range list {
			name, _ := x.(string)
			dt, err := tensor.ParseDType(name)
			if err != nil {
				return nil, c.fail(fmt.Sprintf("attribute dtypes[%d]", i), want, x)
			}
			slots[i].DType = dt
		}
	}
	levels, err := c.ints("lod_levels", len(shapes))
	if err != nil {
		return nil, err
	}
	for i, l := range levels {
		slots[i].LoDLevels = l
	}
	return slots, nil
}

func dtypeNames() []string {
	var names []string
	for d := tensor.Bool; d.Valid(); d++ {
		names = append(names, d.String())
	}
	return names
}
