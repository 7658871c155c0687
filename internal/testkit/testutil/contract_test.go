package testutil

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/pipemare/pipemare"

// TestContract checks the package comment's contract: testutil imports no
// package of this module, and no command or package outside internal/
// depends on it but through its _test.go files (test-helper packages under
// internal/, such as zootest, may import it: they are themselves imported
// only from tests).
func TestContract(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(b), "module "+module+"\n", "the module root")
	self := module + "/internal/testkit/testutil"

	// What every package of the module imports from the module in its
	// non-test files, and which packages are commands.
	imports := map[string]map[string]bool{}
	commands := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := module
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		if f.Name.Name == "main" {
			commands[pkg] = true
		}
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if p == module || strings.HasPrefix(p, module+"/") {
				imports[pkg][p] = true
			}
		}
		return nil
	})
	require.NoError(t, err)
	_, found := imports[self]
	require.True(t, found, "found testutil's own files")

	for p := range imports[self] {
		if p != self {
			t.Errorf("testutil imports %s: it must import no package of this module", p)
		}
	}
	// The packages whose non-test code depends on testutil.
	dependents := map[string]bool{self: true}
	for grew := true; grew; {
		grew = false
		for pkg, imps := range imports {
			for p := range imps {
				if dependents[p] && !dependents[pkg] {
					dependents[pkg], grew = true, true
				}
			}
		}
	}
	var bad []string
	for pkg := range dependents {
		if commands[pkg] || !strings.HasPrefix(pkg, module+"/internal/") {
			bad = append(bad, pkg)
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "non-test code that depends on testutil outside internal/ test helpers")
}
