package s3server_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/internal/s3server"
	"github.com/actorfeed/actorfeed/internal/s3server/s3servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The developer's loop installs the version the harness names.
func TestDevScriptInstallsThisVersion(t *testing.T) {
	b, err := os.ReadFile("../../dev.sh")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(b), s3server.Module+"@"+s3server.Version), "dev.sh installs %s@%s", s3server.Module, s3server.Version)
}

// ACTORFEED_S3SERVER_CPUS runs the gateway under taskset: a list taskset
// refuses stops the launch, naming it; CPU 0, which every machine has,
// serves.
func TestGatewayRunsOnTheCPUsNamed(t *testing.T) {
	bin := s3servertest.Binary(t)
	t.Setenv(s3server.CPUsEnv, "no-such-cpu")
	_, err := s3server.Launch(bin, t.TempDir())
	require.ErrorContains(t, err, "no-such-cpu")

	t.Setenv(s3server.CPUsEnv, "0")
	s, err := s3server.Launch(bin, t.TempDir())
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.MakeBucket(t.Context(), "pinned"))
}
