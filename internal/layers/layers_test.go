package layers

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/actorfeed/actorfeed"

// rule is a row of the table: a package and what it must not import.
type rule struct {
	pkg     string
	mustNot []string // package paths below module; "*" is every package of the module
}

// rules reads the table of docs/architecture.md. A "must not import" cell
// lists packages, with remarks in parentheses; "any actorfeed package" (or
// "anything of actorfeed") means all of them.
func rules(t *testing.T) []rule {
	doc, err := os.ReadFile("../../docs/architecture.md")
	require.NoError(t, err)
	row := regexp.MustCompile(`(?m)^\| ([a-z/]+) \| [^|]* \| ([^|]*) \|$`)
	var out []rule
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		if m[1] == "package" { // the header
			continue
		}
		cell := regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(m[2], "")
		r := rule{pkg: m[1]}
		for _, name := range strings.Split(cell, ",") {
			name = strings.TrimSpace(name)
			switch {
			case strings.Contains(name, "actorfeed"):
				r.mustNot = append(r.mustNot, "*")
			case name != "":
				r.mustNot = append(r.mustNot, name)
			}
		}
		out = append(out, r)
	}
	return out
}

// forbidden reports whether dep (a full import path) is one of what a rule
// names: the package itself, for cmd any command, and for a name ending in
// /... every package below it.
func forbidden(dep, self, name string) bool {
	if !strings.HasPrefix(dep, module+"/") || dep == module+"/"+self {
		return false
	}
	rel := strings.TrimPrefix(dep, module+"/")
	switch {
	case name == "*":
		return true
	case name == "cmd":
		return strings.HasPrefix(rel, "cmd/")
	case strings.HasSuffix(name, "/..."):
		return strings.HasPrefix(rel, strings.TrimSuffix(name, "..."))
	}
	return rel == name
}

// No package of the table depends, even indirectly, on a package its row
// forbids.
func TestImportTable(t *testing.T) {
	rs := rules(t)
	require.GreaterOrEqual(t, len(rs), 10, "the table of docs/architecture.md was read")
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/...").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		deps[fields[0]] = fields[1:]
	}
	for _, r := range rs {
		ds, ok := deps[module+"/"+r.pkg]
		require.True(t, ok, "the table names %s, which go list does not know", r.pkg)
		for _, d := range ds {
			for _, name := range r.mustNot {
				if forbidden(d, r.pkg, name) {
					t.Errorf("%s depends on %s, which docs/architecture.md says it must not import", r.pkg, d)
				}
			}
		}
	}
}

// A name ending in /... forbids every package below it, and only those.
func TestForbiddenNamesATreeWithDots(t *testing.T) {
	require.True(t, forbidden(module+"/internal/harness/benchmark", "sim", "internal/harness/..."))
	require.False(t, forbidden(module+"/internal/harnesses", "sim", "internal/harness/..."))
	require.False(t, forbidden(module+"/internal/baseline", "sim", "internal/harness/..."))
}
