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
// runs at all (two of the TLS tests did not). Every such test in the
// packages that command names matches its pattern.
func TestTestsWithoutTheRaceDetectorRunInTheTestCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`go test -run '([^']+)' ((?:\./\S+ ?)+)`).FindSubmatch(readme)
	require.NotNil(t, m, "the README's test command runs the race-off tests by name")
	pattern := regexp.MustCompile(string(m[1]))
	for _, pkg := range strings.Fields(string(m[2])) {
		files, err := filepath.Glob(filepath.Join("../..", pkg, "*_test.go"))
		require.NoError(t, err)
		for _, file := range files {
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			if !regexp.MustCompile(`(?m)^//go:build !race$`).Match(src) {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
			require.NoError(t, err)
			for _, d := range f.Decls {
				name := funcName(d)
				if strings.HasPrefix(name, "Test") && name != "TestMain" {
					require.True(t, pattern.MatchString(name), "%s in %s: built without the race detector only, and -run '%s' does not pick it", name, file, m[1])
				}
			}
		}
	}
}

func funcName(d ast.Decl) string {
	if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
		return fn.Name.Name
	}
	return ""
}
