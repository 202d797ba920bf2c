package program_test

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/testutil"
	"github.com/actorfeed/actorfeed/program"
	"github.com/actorfeed/actorfeed/tensor"
)

func yamlProgram(paths []string) string {
	return `# PaddlePaddle Fluid's startup program, and a main program looped for 2 passes
startup:
  - op: open_files
    out: multiple_reader
    attrs:
      file_names: [` + strings.Join(paths, ", ") + `]
      thread_num: 2
      shapes: [[-1, 1], [-1, 1]]
      dtypes: [int64, int32]
  - {op: create_shuffle_reader, in: multiple_reader, out: shuffle_reader, attrs: {buffer_size: 64, seed: 7}}
  - {op: create_batch_reader, in: shuffle_reader, out: batch_reader, attrs: {batch_size: 16}}
  - {op: create_double_buffer_reader, in: batch_reader, out: double_buffer_reader}
main:
  passes: 2
  ops:
    - {op: read, in: double_buffer_reader, out: [value, label]}
devices:
  n: 2
  step: 1ms
`
}

func TestYAMLProgram(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 40, 300)
	spec, err := program.Parse([]byte(yamlProgram(paths)))
	require.NoError(t, err)
	require.Equal(t, 2, spec.Passes)
	require.Equal(t, &program.DeviceSpec{Reader: "double_buffer_reader", N: 2, Step: time.Millisecond, Passes: 1}, spec.Devices,
		"devices feed the last reader by default")

	s := program.NewScope(actors.Options{})
	defer s.Close()
	require.NoError(t, s.Run(ctx, &spec.Startup))
	var got []int64
	require.NoError(t, s.Loop(ctx, spec.Main, spec.Passes, func(int) error { collect(t, s, &got); return nil }))
	want := append(every(2, 40), every(2, 40)...)
	require.Equal(t, sorted(want), sorted(got))
}

func TestYAMLErrorsNameTheProblem(t *testing.T) {
	ok := yamlProgram([]string{"a.recordio"})
	for name, tc := range map[string]struct {
		yaml string
		want []string
	}{
		"misspelt top-level key":  {strings.Replace(ok, "startup:", "startp:", 1), []string{"line 2", "startp"}},
		"misspelt op key":         {strings.Replace(ok, "attrs: {batch_size: 16}", "atrs: {batch_size: 16}", 1), []string{"line 11", "atrs"}},
		"unknown attribute":       {strings.Replace(ok, "thread_num: 2", "threads: 2", 1), []string{"line 3", "op 0 (open_files)", "attribute threads", "want one of"}},
		"wrong attribute type":    {strings.Replace(ok, "batch_size: 16", "batch_size: sixteen", 1), []string{"line 11", "op 2 (create_batch_reader)", "batch_size", "want an integer >= 1", "sixteen"}},
		"unknown op":              {strings.Replace(ok, "create_shuffle_reader", "create_shufle_reader", 1), []string{"line 10", "op 1 (create_shufle_reader)", "want one of"}},
		"unknown input":           {strings.Replace(ok, "in: shuffle_reader", "in: shuffled", 1), []string{"line 11", "op 2 (create_batch_reader)", "in", "shuffled"}},
		"main reads nothing":      {strings.Replace(ok, "in: double_buffer_reader, out: [value", "in: reader, out: [value", 1), []string{"line 16", "op 0 (read)", "in", "reader"}},
		"bad step":                {strings.Replace(ok, "step: 1ms", "step: soon", 1), []string{"devices.step", "soon"}},
		"bad passes":              {strings.Replace(ok, "passes: 2", "passes: 0", 1), []string{"main.passes", "0"}},
		"10^8 devices":            {strings.Replace(ok, "n: 2", "n: 100000000", 1), []string{"devices", "n from 1 to 4096", "100000000"}},
		"an empty worker":         {ok + "service: {workers: ['']}\n", []string{"service.workers[0]", "host:port"}},
		"not yaml":                {"startup: [", []string{"program: spec"}},
		"no startup":              {"main: {ops: []}", []string{"startup"}},
		"service without workers": {ok + "service: {credit: 4}\n", []string{"service", "workers"}},
		"bad service lease":       {ok + "service: {workers: [127.0.0.1:7070], lease: never}\n", []string{"service.lease", "never"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := program.Parse([]byte(tc.yaml))
			require.Error(t, err)
			require.ErrorIs(t, err, program.ErrBadProgram)
			require.NotContains(t, err.Error(), "\n", "one line")
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// A service section gives the pipeline's Options.Service.
func TestYAMLService(t *testing.T) {
	spec, err := program.Parse([]byte(yamlProgram([]string{"a.recordio"}) + "service: {workers: [10.0.0.1:7070, 10.0.0.2:7070], credit: 4, lease: 5s}\n"))
	require.NoError(t, err)
	require.Equal(t, &actors.Service{Workers: []string{"10.0.0.1:7070", "10.0.0.2:7070"}, Credit: 4, Lease: 5 * time.Second}, spec.Service)
}

// Every YAML example in docs/programs.md parses.
func TestDocumentedExamplesParse(t *testing.T) {
	doc, err := os.ReadFile("../docs/programs.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	require.NotEmpty(t, blocks)
	for i, b := range blocks {
		_, err := program.Parse([]byte(b[1]))
		require.NoError(t, err, "example %d:\n%s", i, b[1])
	}
}

// An 11 MB spec of 200k ops took 640 MB to decode. A spec is bounded in
// size before it is decoded and in ops before they are checked.
func TestParseBoundsTheSpec(t *testing.T) {
	op := "  - {op: open_files, out: f, attrs: {file_names: [x.rio]}}\n"
	_, err := program.Parse([]byte("startup:\n" + strings.Repeat(op, program.MaxSpecBytes/len(op)+1)))
	require.ErrorContains(t, err, "more than the limit")
	_, err = program.Parse([]byte("startup:\n" + strings.Repeat(op, program.MaxOps+1)))
	require.ErrorContains(t, err, "ops, more than the limit 1024")
}

// FuzzParse: any input is a spec or a SpecError, never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("startup:\n  - {op: open_files, out: f, attrs: {file_names: [x.rio], thread_num: 2}}\n  - {op: create_shuffle_reader, in: f, out: s, attrs: {buffer_size: 64}}\n  - {op: create_batch_reader, in: s, out: b, attrs: {batch_size: 8}}\nmain:\n  passes: 2\n  ops:\n    - {op: read, in: b, out: [x]}\ndevices: {reader: b, n: 2, step: 1ms}\n"))
	f.Add([]byte("startup: [\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := program.Parse(data)
		if err == nil && s == nil {
			t.Fatal("no spec and no error")
		}
		var se *program.SpecError
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("not a SpecError: %v", err)
		}
	})
}

// A spec may name maps that are bound later, on the scope that runs it:
// Parse checks the op, the scope finds the map or says which it knows.
func TestYAMLMapReaderIsBoundWhenRun(t *testing.T) {
	ctx := testutil.Context(t)
	paths := testutil.WriteFiles(t, 2, 40, 300)
	text := strings.Replace(yamlProgram(paths), `  - {op: create_double_buffer_reader, in: batch_reader, out: double_buffer_reader}`,
		`  - {op: create_map_reader, in: batch_reader, out: mapped, attrs: {map: same, workers: 2}}
  - {op: create_double_buffer_reader, in: mapped, out: double_buffer_reader}`, 1)
	spec, err := program.Parse([]byte(text))
	require.NoError(t, err)

	unbound := program.NewScope(actors.Options{})
	defer unbound.Close()
	require.ErrorContains(t, unbound.Run(ctx, &spec.Startup), `a map this scope knows (), got same`)

	s := program.NewScope(actors.Options{})
	defer s.Close()
	var calls atomic.Int64
	s.Maps = map[string]actors.MapFunc{"same": func(sl tensor.Slots) (tensor.Slots, error) { calls.Add(1); return sl, nil }}
	require.NoError(t, s.Run(ctx, &spec.Startup))
	var got []int64
	require.NoError(t, s.Loop(ctx, spec.Main, spec.Passes, func(int) error { collect(t, s, &got); return nil }))
	require.Equal(t, sorted(append(every(2, 40), every(2, 40)...)), sorted(got))
	require.GreaterOrEqual(t, calls.Load(), int64(2*80/16), "the map saw every batch of both passes (and perhaps the next pass's prefetched ones)")
}

// An indentation error on line 4 was reported at line 1, where the
// sequence it broke began.
func TestSyntaxErrorNamesItsOwnLine(t *testing.T) {
	_, err := program.Parse([]byte("startup:\n  - op: open_files\n    out: reader\n   attrs: {}\n"))
	require.ErrorContains(t, err, "line 4: did not find expected '-' indicator")
}
