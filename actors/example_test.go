package actors_test

import (
	"context"
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
