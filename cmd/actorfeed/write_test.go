package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/readers"
)

// writeCLI runs write with input on stdin.
func writeCLI(t *testing.T, input string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	root.SetArgs(append([]string{"write"}, args...))
	root.SetIn(strings.NewReader(input))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// sampleLine is one sample of write's input: one bytes field.
func sampleLine(key, name, data string) string {
	return `{"key":"` + key + `","fields":[{"name":"` + name + `","kind":"bytes","len":` + strconv.Itoa(len(data)) + `}]}` + "\n" + data
}

// write's RecordIO shards are read as any RecordIO file is; an input cut
// before its end line leaves the completed shards and nothing else.
func TestWriteShardsWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	in := sampleLine("a", "txt", "hello") + sampleLine("b", "txt", "bye") + sampleLine("c", "txt", "x") + `{"end":true}` + "\n"
	out, err := writeCLI(t, in, "--to", "recordio", "--out", dir, "--max-samples", "2")
	require.NoError(t, err)
	require.Contains(t, out, `"samples":2,"shard":"`+filepath.Join(dir, "shard-000000.recordio")+`"`)
	require.Contains(t, out, `{"done":true,"samples":3,"shards":2}`)
	r, err := readers.Open(filepath.Join(dir, "shard-000000.recordio"), readers.OpenOptions{})
	require.NoError(t, err)
	items, err := readers.ReadAll(t.Context(), r)
	r.Close()
	require.NoError(t, err)
	require.Len(t, items, 2)
	require.Equal(t, "hello", string(items[0][0].Bytes()))

	cut := t.TempDir()
	_, err = writeCLI(t, sampleLine("a", "txt", "hello")+sampleLine("b", "txt", "bye")+sampleLine("c", "txt", "x"), "--out", cut, "--max-samples", "2")
	require.ErrorContains(t, err, "the input ended before its end line, at sample 3")
	entries, err := os.ReadDir(cut)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the completed shard, and no temporary file")
	require.Equal(t, "shard-000000.tar", entries[0].Name())
}

// Bad input is refused naming the sample, before a length it claims is
// allocated.
func TestWriteRefusesBadInput(t *testing.T) {
	for input, want := range map[string]string{
		"not json\n": "sample 0: its header line",
		`{"key":"a","fields":[{"name":"x","kind":"bytes","len":268435457}]}` + "\n":   "want 0 to 268435456",
		`{"key":"a","fields":[{"name":"x","kind":"bytes","len":100000000}]}` + "\nab": "ended within its 100000000 bytes",
		`{"key":"a","fields":[]}` + "\n":                                              "0 fields",
		sampleLine("a.b", "txt", "x"):                                                 `key "a.b"`,
		strings.Repeat("x", maxHeaderBytes+10):                                        "a header line longer than",
	} {
		_, err := writeCLI(t, input, "--out", t.TempDir())
		require.ErrorContains(t, err, want, "%.60q", input)
	}
	_, err := writeCLI(t, "", "--out", t.TempDir(), "--to", "parquet")
	require.ErrorContains(t, err, `--to "parquet"`)
}

// FuzzWriteInput feeds write's input parser anything: an error or samples,
// never a panic, and never more memory than the input holds.
func FuzzWriteInput(f *testing.F) {
	f.Add([]byte(sampleLine("a", "txt", "hello") + `{"end":true}` + "\n"))
	f.Add([]byte(`{"key":"a","fields":[{"name":"x","kind":"array","dtype":"float32","shape":[2],"len":8}]}` + "\n12345678"))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 1<<20)
		for n := 0; n < 100; n++ {
			s, err := readSample(br, n)
			if err != nil || s.End {
				return
			}
			for _, fl := range s.Fields {
				require.LessOrEqual(t, len(fl.data), len(data))
				fieldTensor(fl) // an error or a tensor of the field's bytes

			}
		}
	})
}
