package s3server_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/s3server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The developer's loop installs the version the harness names.
func TestDevScriptInstallsThisVersion(t *testing.T) {
	b, err := os.ReadFile("../../dev.sh")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(b), s3server.Module+"@"+s3server.Version), "dev.sh installs %s@%s", s3server.Module, s3server.Version)
}
