// Package program is PaddlePaddle Fluid's program layer over the actor runtime: a
// Scope of named variables, and ops by their Fluid names that create
// readers (create_recordio_file_reader, create_random_data_generator,
// open_files, create_shuffle_reader, create_batch_reader,
// create_double_buffer_reader, create_multi_pass_reader,
// create_py_array_reader, and create_map_reader: Fluid's Python
// map_readers and xmap_readers over the scope's named maps) and drive them
// (read, has_next, reset). A startup Program runs once and creates the
// readers; a main Program runs in a loop and reads, as in PaddlePaddle
// Fluid. Programs can be written in Go or in YAML
// (Parse; docs/programs.md).
//
// A reader variable is PaddlePaddle Fluid's ReaderHolder: it hides the reader's type.
// It holds the chain of stages that created it, and starts its actor
// pipeline on first use: read, has_next and reset pull batches from it
// (actors.New), and Scope.RunDevices feeds them to device actors instead
// (actors.NewDevices).
//
// program may import actors, readers, tensor and supervisor. Only sim (for
// what-if runs of a user's program) and cmd import it.
package program
