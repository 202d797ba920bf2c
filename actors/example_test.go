package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/recordio"
	"github.com/actorfeed/actorfeed/tensor"
)

// A trainer embeds a pipeline that feeds two devices: files read by
// prefetching reader actors, shuffled, batched and double-buffered, each
// batch stepped on one device.
func ExampleNewDevices() {
	files, cleanup := exampleFiles() // RecordIO files of (image, label) records
	defer cleanup()

	p, err := actors.NewDevices(
		[]actors.Stage{actors.Files{Paths: files}, actors.Shuffle{Window: 512, Seed: 1}, actors.Batch{Size: 100}},
		actors.Devices{N: 2, Step: func(ctx context.Context, batch actors.Item) error {
			images, labels := batch.Slots[0], batch.Slots[1]
			return trainStep(actors.DeviceFrom(ctx), images, labels)
		}}, actors.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	if err := p.Run(context.Background()); err != nil { // one pass over the files
		log.Fatal(err)
	}
	for _, d := range p.Stats().Devices {
		fmt.Printf("device %d: %d batches, %d samples\n", d.Device, d.Batches, d.Instances)
	}
	// Output:
	// device 0: 10 batches, 1000 samples
	// device 1: 10 batches, 1000 samples
}

// trainStep is the trainer's step on one device.
func trainStep(device int, images, labels tensor.LoDTensor) error { return nil }

// exampleFiles writes two files of 1,000 Fashion-MNIST-shaped records to a
// temporary directory that cleanup removes.
func exampleFiles() (paths []string, cleanup func()) {
	dir, err := os.MkdirTemp("", "actorfeed-example-")
	if err != nil {
		log.Fatal(err)
	}
	records := readers.Samples(1000, func(r int) (tensor.Slots, error) {
		return tensor.Slots{
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 28, 28}, make([]uint8, 784))},
			{Tensor: tensor.MustFromSlice(tensor.Shape{1, 1}, []int64{int64(r % 10)})},
		}, nil
	})
	for f := range 2 {
		path := filepath.Join(dir, fmt.Sprintf("part-%d.recordio", f))
		if _, err := readers.WriteRecordFile(path, recordio.WriterOptions{}, records); err != nil {
			log.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths, func() { os.RemoveAll(dir) }
}

// A trainer that is preempted saves the pipeline's state with its model
// checkpoint, and a new process resumes from it: the batches before the
// checkpoint and after the resume are those of an uninterrupted run.
func ExampleState() {
	files, cleanup := exampleFiles()
	defer cleanup()
	stages := []actors.Stage{actors.Files{Paths: files}, actors.Shuffle{Window: 512, Seed: 1}, actors.Batch{Size: 100}}
	ctx := context.Background()

	// The first process trains 7 steps, checkpoints, and is preempted.
	p, err := actors.New(stages, actors.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for range 7 {
		if _, err := p.Next(ctx); err != nil {
			log.Fatal(err)
		}
	}
	st, err := p.State()
	if err != nil {
		log.Fatal(err)
	}
	saved, _ := json.Marshal(st) // with the model's weights
	p.Close()

	// The next process resumes where it stopped.
	var resume actors.State
	if err := json.Unmarshal(saved, &resume); err != nil {
		log.Fatal(err)
	}
	p, err = actors.New(stages, actors.Options{Resume: []actors.State{resume}})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	left, _ := p.Batches()
	it, err := p.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes of state; resumed at batch %d of epoch %d, %d batches left\n", len(saved), it.Index, it.Epoch, left)
	// Output:
	// 282 bytes of state; resumed at batch 7 of epoch 0, 13 batches left
}

// A trainer's ranks stop at different steps (Devices.Steps), each saving
// the loader's state with its model; the job resumes as another number of
// ranks from all the states, and every sample of the epoch is stepped
// once. The README's "In a Go trainer" shows these calls.
func ExampleRejoin() {
	files, cleanup := exampleFiles()
	defer cleanup()
	ctx, seed := context.Background(), uint64(1)
	seen := map[uint64]int{}
	trainStep := func(rank int, b actors.Item) error { // the model's step
		for _, id := range b.IDs[:b.Instances-b.Padding] {
			seen[id]++
		}
		return nil
	}

	// Rank rank of world trains until its step stopAt (0: the end of its
	// epochs) and returns the state to save with its model.
	train := func(rank, world, stopAt int, states []actors.State) (actors.State, error) {
		p, err := actors.NewDevices(
			[]actors.Stage{actors.Files{Paths: files}, actors.Shuffle{Window: 1024, Seed: seed}, actors.Batch{Size: 64}},
			actors.Devices{N: 1, Steps: stopAt, Step: func(ctx context.Context, b actors.Item) error { return trainStep(rank, b) }},
			actors.Options{Shard: actors.Shard{Rank: rank, World: world}, Resume: states})
		if err != nil {
			return actors.State{}, err
		}
		defer p.Close()
		if err := p.RunEpochs(ctx, 1); err != nil {
			return actors.State{}, err
		}
		return p.State()
	}

	s0, _ := train(0, 2, 3, nil) // rank 0 stops after 3 steps,
	s1, _ := train(1, 2, 8, nil) // rank 1 after 8
	for rank := range 3 {        // resumed as three ranks
		if _, err := train(rank, 3, 0, []actors.State{s0, s1}); err != nil {
			log.Fatal(err)
		}
	}
	once := 0
	for _, n := range seen {
		if n == 1 {
			once++
		}
	}
	fmt.Printf("%d samples, %d of them stepped once\n", len(seen), once)
	// Output:
	// 2000 samples, 2000 of them stepped once
}
