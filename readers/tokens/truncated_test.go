package tokens_test

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/internal/oracle"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/tokens"
)

// A .bin cut shorter while its dataset is open fails every read that
// reaches past its new end, wherever the cut falls, as a truncated file
// naming the .bin, and still reads what is left.
func TestACorpusThatShrinksFailsAsTruncated(t *testing.T) {
	o := oracle.Start(t)
	for name, cut := range map[string]int64{"to nothing": 0, "to a page": 4096, "inside a page": 4096 + 100} {
		t.Run(name, func(t *testing.T) {
			prefix := writeIndexed(t, o, "int32", documents(11, 400, 1000))
			x, err := tokens.OpenIndexed(prefix)
			require.NoError(t, err)
			defer x.Close()
			require.Greater(t, x.Tokens(), uint64(4096/4+100))
			before := make([]int64, 20)
			require.NoError(t, x.ReadTokens(before, 0))
			require.NoError(t, os.Truncate(prefix+".bin", cut))
			err = x.ReadTokens(make([]int64, 100), 4096/4)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			require.ErrorIs(t, err, format.ErrCorrupt)
			require.ErrorContains(t, err, prefix+".bin")
			if cut > 0 {
				after := make([]int64, 20)
				require.NoError(t, x.ReadTokens(after, 0))
				require.Equal(t, before, after)
			}
		})
	}
}

// A corpus read after Close fails.
func TestAClosedCorpusFailsItsReads(t *testing.T) {
	o := oracle.Start(t)
	x, err := tokens.OpenIndexed(writeIndexed(t, o, "uint16", documents(3, 20, 1000)))
	require.NoError(t, err)
	require.NoError(t, x.Close())
	require.ErrorIs(t, x.ReadTokens(make([]int64, 4), 0), os.ErrClosed)
}
