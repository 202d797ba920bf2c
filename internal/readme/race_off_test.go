package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tests built only without the race detector (//go:build !race: they
// start remote nodes, and the pinned remote races with itself) run in the
// README's test command only through its second go test, whose -run
// pattern picks them by name; one whose name the pattern misses never
// runs at all (two of the TLS tests did not). Every such test is in a
// package that command names, and matches its pattern.
func TestTestsWithoutTheRaceDetectorRunInTheTestCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`go test -run '([^']+)' ((?:\./\S+ ?)+)`).FindSubmatch(readme)
	require.NotNil(t, m, "the README's test command runs the race-off tests by name")
	pattern, pkgs := regexp.MustCompile(string(m[1])), strings.Fields(string(m[2]))
	raceOff := regexp.MustCompile(`(?m)^//go:build !race$`)
	err = filepath.WalkDir("../..", func(file string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(file, "_test.go") {
			return err
		}
		src, err := os.ReadFile(file)
		if err != nil || !raceOff.Match(src) {
			return err
		}
		rel, _ := filepath.Rel("../..", filepath.Dir(file))
		require.Contains(t, pkgs, "./"+filepath.ToSlash(rel), "%s: built without the race detector only, in a package the command does not name", file)
		f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if name := funcName(d); strings.HasPrefix(name, "Test") && name != "TestMain" {
				require.True(t, pattern.MatchString(name), "%s in %s: built without the race detector only, and -run '%s' does not pick it", name, file, m[1])
			}
		}
		return nil
	})
	require.NoError(t, err)
}

func funcName(d ast.Decl) string {
	if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
		return fn.Name.Name
	}
	return ""
}
