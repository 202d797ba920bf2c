package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// webdatasetWriter writes a shard as the webdataset library's TarWriter
// does (tarfile in stream mode, pax headers for the fractional mtime;
// read-only members owned by "bigdata"), gzip'd when out ends in gz.
const webdatasetWriter = `
import sys, tarfile, time, io, os
src, out = sys.argv[1], sys.argv[2]
mode = "w|gz" if out.endswith("gz") else "w|"
with open(out, "wb") as f, tarfile.open(fileobj=f, mode=mode) as tar:
    for name in sorted(os.listdir(src)):
        data = open(os.path.join(src, name), "rb").read()
        ti = tarfile.TarInfo(name)
        ti.size, ti.mode, ti.mtime = len(data), 0o444, time.time()
        ti.uname = ti.gname = "bigdata"
        tar.addfile(ti, io.BytesIO(data))
`

// PythonShard writes the files in src, in name order, as a shard with
// Python's tarfile, as the webdataset library writes one.
func PythonShard(t testing.TB, src, out string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 writes the shards the webdataset library would")
	b, err := exec.Command(py, "-c", webdatasetWriter, src, out).CombinedOutput()
	require.NoError(t, err, "%s", b)
}

// GNUShard writes the files in src, in name order, as a shard with GNU
// tar in its own format.
func GNUShard(t testing.TB, src, out string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	list := filepath.Join(t.TempDir(), "list")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(names, "\n")+"\n"), 0o644))
	b, err := exec.Command("tar", "--format=gnu", "-cf", out, "-C", src, "-T", list).CombinedOutput()
	require.NoError(t, err, "%s", b)
}
