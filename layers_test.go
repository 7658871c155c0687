package pipemare

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/pipemare/pipemare"

// floors are the module's packages from the bottom up (paths relative to
// the module; "." is this package, the embedded data). A package's
// non-test files import only packages of lower floors: nothing imports
// upward, and packages on one floor do not know each other (T1 in
// rescheduler and T2 in correction among them). docs/architecture.md draws
// the same floors.
var floors = []struct {
	name     string
	packages []string
}{
	{"leaves", []string{".", "schedule", "transport", "internal/affinity", "internal/bnstate", "internal/faultpoint",
		"internal/jsonkeys", "internal/reach", "internal/tensorutil", "internal/update", "transport/grpcnet/internal/framepb",
		"internal/testkit/testutil", "internal/testkit/testmodels"}},
	{"engine internals, formats", []string{"checkpoint", "delay", "runspec", "transport/internal/linkstate", "transport/pki", "internal/recycle", "internal/slots",
		"internal/stageops", "internal/tape"}},
	{"the plan, solvers, the network", []string{"graphsplit", "solvers", "transport/grpcnet", "transport/shmnet"}},
	{"stages, decorators, places", []string{"internal/stage", "rescheduler", "correction", "footprint", "launch"}},
	{"the driver, methods", []string{"asyncvm", "method"}},
	{"models", []string{"zoo"}},
	{"a run", []string{"train"}},
	{"a run's directory", []string{"rundir"}},
	{"a run's outputs, as the command makes them", []string{"runout"}},
	{"sweeps, benches", []string{"experiment", "bench"}},
	{"the command", []string{"cmd/pipemare"}},
	{"test kits over the engine", []string{"internal/testkit/exectest", "internal/testkit/delaysim", "internal/testkit/zootest"}},
}

// testKits is where the test kits live: only _test.go files import them.
const testKits = "internal/testkit/"

// TestNoPackageImportsUpward: every package of the module is on a floor,
// and its non-test files import only packages of lower floors; no non-test
// file outside the test kits imports a test kit.
func TestNoPackageImportsUpward(t *testing.T) {
	imports := moduleImports(t)
	floor := map[string]int{}
	for i, f := range floors {
		for _, p := range f.packages {
			_, dup := floor[p]
			require.False(t, dup, "%s is on two floors", p)
			floor[p] = i
		}
	}
	for pkg, imps := range imports {
		i, ok := floor[pkg]
		if !ok {
			t.Errorf("package %s is on no floor: add it to floors (and to docs/architecture.md)", pkg)
			continue
		}
		for _, imp := range imps {
			j, ok := floor[imp]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is on no floor", pkg, imp)
			case j >= i:
				t.Errorf("%s (floor %q) imports %s (floor %q): only lower floors", pkg, floors[i].name, imp, floors[j].name)
			case strings.HasPrefix(imp, testKits) && !strings.HasPrefix(pkg, testKits):
				t.Errorf("%s imports the test kit %s outside its tests", pkg, imp)
			}
		}
	}
	for p := range floor {
		_, ok := imports[p]
		require.True(t, ok, "floors list %s, which has no Go file", p)
	}
}

// moduleImports returns, for every package of the module (nested modules
// left out), the module's packages its non-test files import.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != "." {
				return filepath.SkipDir // another module
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
		pkg := filepath.ToSlash(filepath.Dir(path))
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			rel, ok := strings.CutPrefix(p, module)
			if !ok || (rel != "" && rel[0] != '/') {
				continue
			}
			rel = strings.TrimPrefix(rel, "/")
			if rel == "" {
				rel = "."
			}
			if !slices.Contains(out[pkg], rel) {
				out[pkg] = append(out[pkg], rel)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}
