package program_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/registered"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/program"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// every is the values of k files of n records, sorted.
func every(k, n int) []int64 {
	var out []int64
	for f := range k {
		for r := range n {
			out = append(out, int64(f*1_000_000+r))
		}
	}
	return out
}

// collect reads the tensors a read op wrote to "value" and "label",
// checking they stay aligned.
func collect(t *testing.T, s *program.Scope, into *[]int64) {
	t.Helper()
	v, ok := s.Tensor("value")
	require.True(t, ok)
	l, ok := s.Tensor("label")
	require.True(t, ok)
	vals, err := tensor.View[int64](v.Tensor)
	require.NoError(t, err)
	labels, err := tensor.View[int32](l.Tensor)
	require.NoError(t, err)
	require.Len(t, labels, len(vals))
	for i, x := range vals {
		require.EqualValues(t, x%1_000_000%10, labels[i], "image and label stay together")
	}
	*into = append(*into, vals...)
}

// readToEOF runs readOp until the data ends, collecting the values.
func readToEOF(t *testing.T, ctx context.Context, s *program.Scope) []int64 {
	t.Helper()
	var got []int64
	for {
		err := s.Run(ctx, &program.Program{Ops: []program.Op{readOp}})
		if errors.Is(err, program.ErrEOF) {
			return got
		}
		require.NoError(t, err)
		collect(t, s, &got)
	}
}

func sorted(x []int64) []int64 {
	sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
	return x
}

// startup is PaddlePaddle Fluid's startup program: open_files -> batch -> (multi
// pass) -> double buffer.
func startup(paths []string, passNum int) *program.Program {
	p := &program.Program{Ops: []program.Op{
		{Type: "open_files", Out: []string{"multiple_reader"}, Attrs: map[string]any{
			"file_names": paths, "thread_num": 2, "shapes": [][]int{{-1, 1}, {-1, 1}}, "dtypes": []string{"int64", "int32"}}},
		{Type: "create_shuffle_reader", In: "multiple_reader", Out: []string{"shuffle_reader"}, Attrs: map[string]any{"buffer_size": 50, "seed": 3}},
		{Type: "create_batch_reader", In: "shuffle_reader", Out: []string{"batch_reader"}, Attrs: map[string]any{"batch_size": 16}},
	}}
	top := "batch_reader"
	if passNum > 0 {
		p.Ops = append(p.Ops, program.Op{Type: "create_multi_pass_reader", In: top, Out: []string{"multi_pass_reader"},
			Attrs: map[string]any{"pass_num": passNum}})
		top = "multi_pass_reader"
	}
	p.Ops = append(p.Ops, program.Op{Type: "create_double_buffer_reader", In: top, Out: []string{"double_buffer_reader"}})
	return p
}

var readOp = program.Op{Type: "read", In: "double_buffer_reader", Out: []string{"value", "label"}}

// PaddlePaddle Fluid's first main program: has_next decides between reading and, at
// the end of a pass, reset and counting passes.
func TestSeedsMainProgramWithReset(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 70, 300)
	s := program.NewScope(actors.Options{System: actors.NewSystem()})
	defer s.Close()
	require.NoError(t, s.Run(ctx, startup(paths, 0)))

	const requiredPasses = 3
	hasNext := &program.Program{Ops: []program.Op{{Type: "has_next", In: "double_buffer_reader", Out: []string{"has_next"}}}}
	read := &program.Program{Ops: []program.Op{readOp}}
	reset := &program.Program{Ops: []program.Op{{Type: "reset", In: "double_buffer_reader"}}}
	perPass := make([][]int64, requiredPasses)
	for pass, notCompleted := 0, true; notCompleted; {
		require.NoError(t, s.Run(ctx, hasNext))
		if more, _ := s.Bool("has_next"); more {
			require.NoError(t, s.Run(ctx, read))
			collect(t, s, &perPass[pass])
		} else {
			require.NoError(t, s.Run(ctx, reset))
			pass++
			notCompleted = pass < requiredPasses
		}
	}
	for pass, got := range perPass {
		require.Equal(t, every(3, 70), sorted(got), "pass %d", pass)
	}
	require.NoError(t, s.Close())
	require.Empty(t, registered.Actors(s.Options.System))
}

// PaddlePaddle Fluid's second main program: a multi-pass reader, read until has_next
// says false.
func TestSeedsMainProgramWithMultiPass(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 70, 300)
	s := program.NewScope(actors.Options{})
	defer s.Close()
	require.NoError(t, s.Run(ctx, startup(paths, 4)))
	main := &program.Program{Ops: []program.Op{readOp, {Type: "has_next", In: "double_buffer_reader", Out: []string{"not_completed"}}}}
	var got []int64
	for notCompleted := true; notCompleted; {
		require.NoError(t, s.Run(ctx, main))
		collect(t, s, &got)
		notCompleted, _ = s.Bool("not_completed")
	}
	var want []int64
	for range 4 {
		want = append(want, every(3, 70)...)
	}
	require.Equal(t, sorted(want), sorted(got), "4 passes, each sample once per pass")
	// Past the end, read says there is no next data.
	err := s.Run(ctx, &program.Program{Ops: []program.Op{readOp}})
	require.ErrorIs(t, err, program.ErrEOF)
}

func TestLoop(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 50, 300)
	s := program.NewScope(actors.Options{})
	defer s.Close()
	require.NoError(t, s.Run(ctx, startup(paths, 0)))
	got := map[int][]int64{}
	require.NoError(t, s.Loop(ctx, &program.Program{Ops: []program.Op{readOp}}, 2, func(pass int) error {
		var vals []int64
		collect(t, s, &vals)
		got[pass] = append(got[pass], vals...)
		return nil
	}))
	require.Equal(t, every(2, 50), sorted(got[0]))
	require.Equal(t, every(2, 50), sorted(got[1]))
}

func TestPyArrayReader(t *testing.T) {
	ctx := testutil.Context(t)
	s := program.NewScope(actors.Options{})
	defer s.Close()
	slots := []readers.SlotSpec{{Shape: tensor.Shape{1, 1}, DType: tensor.Int64}, {Shape: tensor.Shape{1, 1}, DType: tensor.Int32}}
	q, err := s.InitFeedQueue("feeder", 4, slots)
	require.NoError(t, err)
	_, err = s.InitFeedQueue("feeder", 4, slots)
	require.ErrorIs(t, err, readers.ErrAlreadyInitialized, "a feed queue holder is initialised once")

	require.NoError(t, s.Run(ctx, &program.Program{Ops: []program.Op{
		{Type: "create_py_array_reader", Out: []string{"py_reader"}, Attrs: map[string]any{"feeder_name": "feeder"}},
		{Type: "create_batch_reader", In: "py_reader", Out: []string{"double_buffer_reader"}, Attrs: map[string]any{"batch_size": 10}},
	}}))
	done := make(chan error, 1)
	go func() {
		for r := range 100 {
			if err := q.Push(ctx, tensor.Slots{
				{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(r)})},
				{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int32{int32(r % 10)})},
			}); err != nil {
				done <- err
				return
			}
		}
		q.Close()
		done <- nil
	}()
	got := readToEOF(t, ctx, s)
	require.NoError(t, <-done)
	require.Equal(t, every(1, 100), got, "in push order")

	err = s.Run(ctx, &program.Program{Ops: []program.Op{{Type: "create_py_array_reader", Out: []string{"x"}, Attrs: map[string]any{"feeder_name": "nobody"}}}})
	var oe *program.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "feeder_name", oe.Field)
}

func TestRandomDataGenerator(t *testing.T) {
	ctx := testutil.Context(t)
	s := program.NewScope(actors.Options{})
	defer s.Close()
	require.NoError(t, s.Run(ctx, &program.Program{Ops: []program.Op{
		{Type: "create_random_data_generator", Out: []string{"random"}, Attrs: map[string]any{"shapes": [][]int{{1, 4}, {1, 1}}, "min": -2.0, "max": 2.0, "seed": 5}},
		{Type: "create_batch_reader", In: "random", Out: []string{"batches"}, Attrs: map[string]any{"batch_size": 8}},
	}}))
	read := &program.Program{Ops: []program.Op{{Type: "read", In: "batches", Out: []string{"x", "y"}}}}
	for range 20 {
		require.NoError(t, s.Run(ctx, read))
		x, ok := s.Tensor("x")
		require.True(t, ok)
		require.Equal(t, tensor.Shape{8, 4}, x.Shape())
		vals, err := tensor.View[float32](x.Tensor)
		require.NoError(t, err)
		for _, v := range vals {
			require.True(t, v >= -2 && v <= 2)
		}
	}
}

func TestRunDevices(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 64, 300)
	s := program.NewScope(actors.Options{})
	defer s.Close()
	require.NoError(t, s.Run(ctx, startup(paths, 0)))
	p, err := s.RunDevices(ctx, "double_buffer_reader", actors.Devices{N: 2})
	require.NoError(t, err)
	require.NoError(t, p.Run(ctx))
	n := 0
	for _, d := range p.Stats().Devices {
		n += d.Instances
	}
	require.Equal(t, 128, n)
	_, err = s.RunDevices(ctx, "double_buffer_reader", actors.Devices{N: 2})
	require.ErrorIs(t, err, program.ErrBadProgram, "a reader starts once")
}

func TestBadOps(t *testing.T) {
	ctx := testutil.Context(t)
	for name, tc := range map[string]struct {
		op    program.Op
		field string
	}{
		"unknown op":        {program.Op{Type: "create_magic_reader", Out: []string{"x"}}, ""},
		"unknown attribute": {program.Op{Type: "open_files", Out: []string{"x"}, Attrs: map[string]any{"file_names": []string{"a.rio"}, "threads": 2}}, "attribute threads"},
		"missing attribute": {program.Op{Type: "open_files", Out: []string{"x"}}, "attribute file_names"},
		"wrong type":        {program.Op{Type: "open_files", Out: []string{"x"}, Attrs: map[string]any{"file_names": []string{"a.rio"}, "thread_num": "two"}}, "attribute thread_num"},
		"bad value":         {program.Op{Type: "create_batch_reader", In: "files", Out: []string{"x"}, Attrs: map[string]any{"batch_size": 0}}, "attribute batch_size"},
		"no such input":     {program.Op{Type: "create_batch_reader", In: "nope", Out: []string{"x"}, Attrs: map[string]any{"batch_size": 4}}, "in"},
		"no output":         {program.Op{Type: "create_batch_reader", In: "files", Attrs: map[string]any{"batch_size": 4}}, "out"},
		"bad dtype":         {program.Op{Type: "open_files", Out: []string{"x"}, Attrs: map[string]any{"file_names": []string{"a.rio"}, "shapes": [][]int{{1}}, "dtypes": []string{"int65"}}}, "attribute dtypes[0]"},
		"redefined":         {program.Op{Type: "create_batch_reader", In: "files", Out: []string{"files"}, Attrs: map[string]any{"batch_size": 4}}, "out"},
	} {
		t.Run(name, func(t *testing.T) {
			s := program.NewScope(actors.Options{})
			defer s.Close()
			require.NoError(t, s.Run(ctx, &program.Program{Ops: []program.Op{
				{Type: "open_files", Out: []string{"files"}, Attrs: map[string]any{"file_names": []string{"a.rio"}}}}}))
			err := s.Run(ctx, &program.Program{Ops: []program.Op{tc.op}})
			require.ErrorIs(t, err, program.ErrBadProgram)
			var oe *program.OpError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, tc.op.Type, oe.Op)
			require.Equal(t, tc.field, oe.Field)
			require.NotEmpty(t, oe.Want)
			t.Log(err)
		})
	}
}

// create_map_reader runs a map of the scope's by name, one at a time or
// on workers, on every batch; a name the scope does not know is an error
// that lists those it does.
func TestMapReaderRunsTheScopesMaps(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 70, 300)
	const shift = 1_000_000_000 // keeps every value's label (collect)
	shiftValues := func(s tensor.Slots) (tensor.Slots, error) {
		vals, err := tensor.View[int64](s[0].Tensor)
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(vals))
		for i, v := range vals {
			out[i] = v + shift
		}
		shifted, err := tensor.FromSlice(s[0].Tensor.Shape(), out)
		if err != nil {
			return nil, err
		}
		return tensor.Slots{{Tensor: shifted}, s[1]}, nil
	}
	var want []int64
	for _, v := range every(3, 70) {
		want = append(want, v+shift)
	}
	for _, workers := range []int{0, 3} {
		s := program.NewScope(actors.Options{})
		s.Maps = map[string]actors.MapFunc{"shift": shiftValues}
		p := startup(paths, 0)
		last := len(p.Ops) - 1 // the double buffer reads the map's reader
		p.Ops = append(p.Ops[:last], program.Op{Type: "create_map_reader", In: "batch_reader", Out: []string{"mapped"},
			Attrs: map[string]any{"map": "shift", "workers": workers}}, p.Ops[last])
		p.Ops[last+1].In = "mapped"
		require.NoError(t, s.Run(ctx, p))
		require.Equal(t, want, sorted(readToEOF(t, ctx, s)), "workers %d", workers)
		require.NoError(t, s.Close())
	}

	s := program.NewScope(actors.Options{})
	defer s.Close()
	s.Maps = map[string]actors.MapFunc{"shift": shiftValues}
	err := s.Run(ctx, &program.Program{Ops: []program.Op{
		{Type: "open_files", Out: []string{"files"}, Attrs: map[string]any{"file_names": paths}},
		{Type: "create_map_reader", In: "files", Out: []string{"mapped"}, Attrs: map[string]any{"map": "normalize"}},
	}})
	var opErr *program.OpError
	require.ErrorAs(t, err, &opErr)
	require.ErrorContains(t, err, "a map this scope knows (shift)")
}

// create_map_reader names a map SampleMaps makes (a name with parameters),
// which sees its samples; a name it refuses is the op's error, with why.
func TestMapReaderMakesSampleMaps(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 70, 300)
	var seen atomic.Int64
	s := program.NewScope(actors.Options{})
	defer s.Close()
	s.SampleMaps = func(name string) (actors.SampleMapFunc, error) {
		if name != "ids(x)" {
			return nil, fmt.Errorf("no such map")
		}
		return func(smp actors.Samples, sl tensor.Slots) (tensor.Slots, error) {
			seen.Add(int64(len(smp.IDs)))
			return sl, nil
		}, nil
	}
	p := startup(paths, 0)
	last := len(p.Ops) - 1
	p.Ops = append(p.Ops[:last], program.Op{Type: "create_map_reader", In: "batch_reader", Out: []string{"mapped"},
		Attrs: map[string]any{"map": "ids(x)"}}, p.Ops[last])
	p.Ops[last+1].In = "mapped"
	require.NoError(t, s.Run(ctx, p))
	require.Len(t, readToEOF(t, ctx, s), 210)
	require.EqualValues(t, 210, seen.Load(), "the map saw every sample's id")

	bad := program.NewScope(actors.Options{})
	defer bad.Close()
	bad.SampleMaps = s.SampleMaps
	err := bad.Run(ctx, &program.Program{Ops: []program.Op{
		{Type: "open_files", Out: []string{"files"}, Attrs: map[string]any{"file_names": paths}},
		{Type: "create_map_reader", In: "files", Out: []string{"mapped"}, Attrs: map[string]any{"map": "ids(y)"}},
	}})
	require.ErrorContains(t, err, "no such map")
}

// open_files takes globs and brace lists, as run's --data does: the files
// they name, each once, give what the files listed give; a pattern that
// names no file is the op's error.
func TestOpenFilesExpandsPatterns(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 3, 70, 300) // part-0.rio .. part-2.rio
	dir := filepath.Dir(paths[0])
	read := func(names []string) []int64 {
		s := program.NewScope(actors.Options{System: actors.NewSystem()})
		defer s.Close()
		require.NoError(t, s.Run(ctx, startup(names, 0)))
		return sorted(readToEOF(t, ctx, s))
	}
	want := read(paths)
	require.Equal(t, every(3, 70), want)
	require.Equal(t, want, read([]string{filepath.Join(dir, "part-{0..2}.rio")}))
	require.Equal(t, want, read([]string{filepath.Join(dir, "part-*.rio"), paths[1]}), "a file named twice is read once")

	for names, msg := range map[string]string{"part-9*.rio": "matches no file", "part-{0..2.rio": "leaves the brace"} {
		s := program.NewScope(actors.Options{})
		err := s.Run(ctx, startup([]string{filepath.Join(dir, names)}, 0))
		var opErr *program.OpError
		require.ErrorAs(t, err, &opErr, names)
		require.Equal(t, "file_names", opErr.Field)
		require.ErrorContains(t, err, msg)
		require.NoError(t, s.Close())
	}
}
