package actors_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/actors"
)

func TestFilesBatchOnePass(t *testing.T) {
	ctx := testCtx(t)
	paths := writeFiles(t, 3, 100, 256)
	sys := actors.NewSystem()
	p, err := actors.New([]actors.Stage{actors.Files{Paths: paths, Threads: 2}, actors.Batch{Size: 16}}, actors.Options{System: sys})
	require.NoError(t, err)
	l := drain(t, ctx, p)
	requireExactlyOnce(t, allIDs(3, 100), l.ids)
	closeAndCheck(t, p, sys)
}
