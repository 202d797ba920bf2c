package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tests built only without the race detector (a //go:build line with
// !race: they start remote nodes, and the pinned remote races with itself)
// run in the README's test command only through dev.sh's second go test,
// which finds them by their build line. Every such test, however its
// build line is written, is in what dev.sh finds: one it missed would
// never run at all (two of the TLS tests once did not).
func TestTestsWithoutTheRaceDetectorRunInTheTestCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^\./dev\.sh test\s+# the tests$`, string(readme), "the README's test command is dev.sh's")
	out, err := exec.Command("bash", "../../dev.sh", "race-off").Output()
	require.NoError(t, err)
	fields := strings.Fields(string(out))
	require.GreaterOrEqual(t, len(fields), 2, "dev.sh race-off prints the test names and their packages: %q", out)
	names, pkgs := strings.Split(fields[0], "|"), fields[1:]
	raceOff := regexp.MustCompile(`(?m)^//go:build .*!race\b`)
	found := 0
	err = filepath.WalkDir("../..", func(file string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(file, "_test.go") {
			return err
		}
		src, err := os.ReadFile(file)
		if err != nil || !raceOff.Match(src) {
			return err
		}
		rel, _ := filepath.Rel("../..", filepath.Dir(file))
		require.Contains(t, pkgs, "./"+filepath.ToSlash(rel), "%s: built without the race detector only, in a package dev.sh does not test without it", file)
		f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if name := funcName(d); strings.HasPrefix(name, "Test") && name != "TestMain" {
				require.Contains(t, names, name, "%s in %s: built without the race detector only, and dev.sh does not run it", name, file)
				found++
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, found)
}

func funcName(d ast.Decl) string {
	if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
		return fn.Name.Name
	}
	return ""
}
