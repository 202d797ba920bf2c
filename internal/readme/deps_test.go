package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's test command on a machine that lacks a Debian package
// stops before any test, and someone who is not root is given the exact
// apt-get line; here dpkg knows every package but two, and id says the
// user is not root.
func TestDevShSaysWhichPackagesToInstall(t *testing.T) {
	bin := t.TempDir()
	fake := map[string]string{
		"dpkg": "#!/bin/sh\ncase \"$2\" in fortunes|libturbojpeg0) exit 1;; esac\nexit 0\n",
		"id":   "#!/bin/sh\necho 1000\n",
	}
	for name, script := range fake {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755))
	}
	cmd := exec.Command("bash", "../../dev.sh", "deps")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 2, exit.ExitCode(), "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, "  sudo apt-get install -y libturbojpeg0 fortunes", lines[len(lines)-1])
}
