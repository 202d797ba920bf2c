package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// snippet wraps a README snippet as the body of a function whose
// parameters are what the README leaves to the reader: a context, the
// trainer's files, a seed and its training step.
const snippet = `package main

import (
	"context"
	"log"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/tensor"
)

var (
	_ = log.Fatal
	_ = actors.New
	_ = readers.Open
)

func snippet(ctx context.Context, files []string, seed uint64, trainStep func(device int, images, labels tensor.LoDTensor) error) error {
%s
	return nil
}

func main() {}
`

// The README's Go snippets compile and pass vet as written (its
// synchronous-readers snippet had an unused error and an undeclared seed).
func TestREADMESnippetsCompile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	require.NotEmpty(t, blocks, "the README has Go snippets")
	for i, b := range blocks {
		// testdata keeps the package out of ./... while it exists.
		dir, err := os.MkdirTemp("testdata", "snippet-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		src := strings.Replace(snippet, "%s", string(b[1]), 1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
		out, err := exec.Command("go", "vet", "./"+filepath.ToSlash(dir)).CombinedOutput()
		require.NoError(t, err, "README snippet %d does not build:\n%s\n%s", i+1, b[1], out)
	}
}
