package sim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/tensor"
)

// A trainer's own test: run the pipeline once without faults for the
// reference, once under a fault schedule, and check that the faulty run
// consumed every sample exactly once and left nothing running.
func Example_trainersOwnTest() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "trainer-test-")
	defer os.RemoveAll(dir)
	paths := exampleFiles(dir, 2, 100)

	schedule, err := sim.ParseSchedule([]byte(`faults:
  - {kind: read-error, p: 0.01}
  - {kind: latency, dist: {uniform: [0s, 1ms]}}
  - {kind: panic-device, device: 1, at: 3}
`))
	if err != nil {
		panic(err)
	}
	stages := []actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Shuffle{Window: 64, Seed: 1},
		actors.Batch{Size: 10}, actors.DoubleBuffer{}}
	train := func(ctx context.Context, it actors.Item) error { return nil } // the trainer's step

	run := func(inj *sim.Injector) (*sim.Ledger, error) {
		leaks := sim.NewLeakCheck()
		ledger := &sim.Ledger{}
		opts := actors.Options{System: actors.NewSystem()}
		step := train
		if inj != nil {
			opts, step = inj.Options(opts), inj.Step(train)
		}
		p, err := actors.NewDevices(stages, actors.Devices{N: 2, Step: ledger.Step(step)}, opts)
		if err != nil {
			return nil, err
		}
		err = p.Run(ctx)
		return ledger, errors.Join(err, p.Close(), leaks.Check(opts.System))
	}

	ref, err := run(nil)
	if err != nil {
		panic(err)
	}
	inj, err := sim.NewInjector(schedule, sim.InjectorOptions{Seed: 1})
	if err != nil {
		panic(err)
	}
	got, err := run(inj)
	fmt.Println("run:", err)
	if err != nil {
		return
	}
	fmt.Println("exactly once:", got.Check(ref, sim.Tolerance{}))
	fmt.Println("samples:", got.Samples())
	fmt.Println("device crashes:", inj.Injected().ByKind[sim.PanicDevice])
	// Output:
	// run: <nil>
	// exactly once: <nil>
	// samples: 200
	// device crashes: 1
}

// exampleFiles writes files of n records each, a [1] int64 slot.
func exampleFiles(dir string, files, n int) []string {
	var paths []string
	for f := range files {
		path := filepath.Join(dir, fmt.Sprintf("part-%d.recordio", f))
		_, err := readers.WriteRecordFile(path, recordio.WriterOptions{MaxChunkBytes: 256}, readers.Samples(n, func(r int) (tensor.Slots, error) {
			return tensor.Slots{{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(f*n + r)})}}, nil
		}))
		if err != nil {
			panic(err)
		}
		paths = append(paths, path)
	}
	return paths
}
