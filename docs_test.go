package pipemare

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exampleRef is how the README names the Example a Go snippet comes from:
// "`ExampleName` in `dir/file_test.go`".
var exampleRef = regexp.MustCompile("`(Example\\w*)` in `([\\w/]+_test\\.go)`")

// TestREADMESnippetsAreExamples: every Go snippet of the README is an
// excerpt of a compiled, runnable Example, which the text after it names:
// its lines appear, in order, in the Example's body ("…" lines stand for
// lines left out).
func TestREADMESnippetsAreExamples(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	parts := strings.Split(string(b), "```go\n")
	require.Greater(t, len(parts), 1, "the README has Go snippets")
	for _, part := range parts[1:] {
		snippet, after, ok := strings.Cut(part, "```")
		require.True(t, ok)
		ref := exampleRef.FindStringSubmatch(after)
		require.NotNil(t, ref, "the text after the snippet names its Example:\n%s", snippet)
		src, err := os.ReadFile(ref[2])
		require.NoError(t, err)
		body := functionBody(t, string(src), ref[1])
		at := 0
		for _, line := range strings.Split(snippet, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line == "…" {
				continue
			}
			i := indexFrom(body, line, at)
			require.GreaterOrEqual(t, i, 0, "%s in %s has no line %q (after line %d)", ref[1], ref[2], line, at)
			at = i + 1
		}
	}
}

// functionBody returns the trimmed lines of func name in src.
func functionBody(t *testing.T, src, name string) []string {
	_, rest, ok := strings.Cut(src, "\nfunc "+name+"() {\n")
	require.True(t, ok, "no func %s", name)
	body, _, ok := strings.Cut(rest, "\n}\n")
	require.True(t, ok)
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	return lines
}

func indexFrom(lines []string, line string, from int) int {
	for i := from; i < len(lines); i++ {
		if lines[i] == line {
			return i
		}
	}
	return -1
}

// outsideDocs are ways of citing what is not in the repository: the team's
// design notes and issue tracker. The repository states facts instead.
var outsideDocs = regexp.MustCompile(`\bDESIGN\b|/work/|\.\./shared|issue's|the issue\b`)

// TestNothingCitesOutsideDocuments: no Go file or Markdown file of the
// repository refers the reader to a document it does not contain.
func TestNothingCitesOutsideDocuments(t *testing.T) {
	self, err := filepath.Abs("docs_test.go")
	require.NoError(t, err)
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md")) {
			return nil
		}
		if abs, _ := filepath.Abs(path); abs == self {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			require.NotRegexp(t, outsideDocs, line, "%s:%d", path, i+1)
		}
		return nil
	})
	require.NoError(t, err)
}

// TestCIRunsTheREADMETestCommand: the README's test command (the sh block
// after "Run the tests") is, character for character, the command .ci/run
// ends with, so what CI checks is what a newcomer runs.
func TestCIRunsTheREADMETestCommand(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(readme), "Run the tests")
	require.True(t, ok, "the README has a \"Run the tests\" paragraph")
	_, block, ok := strings.Cut(after, "```sh\n")
	require.True(t, ok, "a sh block follows \"Run the tests\"")
	command, _, ok := strings.Cut(block, "\n```")
	require.True(t, ok)
	ci, err := os.ReadFile(filepath.Join(".ci", "run"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	require.Equal(t, strings.TrimSpace(command), lines[len(lines)-1])
	requireVetBeforeVetOff(t, strings.TrimSpace(command))
}

// requireVetBeforeVetOff: a go test of the command skips go test's own vet
// (-vet=off, a subset of go vet's checks) only after a go vet of the same
// packages with the same tags, in the same directory.
func requireVetBeforeVetOff(t *testing.T, command string) {
	type key struct{ dir, tags, pkgs string }
	vetted := map[key]bool{}
	dir := "."
	for _, step := range strings.Split(command, "&&") {
		step = strings.TrimSpace(step)
		if d, ok := strings.CutPrefix(step, "(cd "); ok {
			dir, step = strings.Fields(d)[0], ""
		}
		args := strings.Fields(strings.TrimSuffix(step, ")"))
		if len(args) < 2 || args[0] != "go" {
			continue
		}
		k := key{dir: dir}
		var pkgs []string
		vetOff := false
		for i := 2; i < len(args); i++ {
			switch a := args[i]; {
			case a == "-tags":
				i++
				k.tags = args[i]
			case a == "-vet=off":
				vetOff = true
			case !strings.HasPrefix(a, "-"):
				pkgs = append(pkgs, a)
			case a == "-timeout":
				i++
			}
		}
		k.pkgs = strings.Join(pkgs, " ")
		switch args[1] {
		case "vet":
			vetted[k] = true
		case "test":
			require.True(t, !vetOff || vetted[k], "%q skips vet, but no go vet of %s (tags %q, in %s) ran before it", step, k.pkgs, k.tags, k.dir)
		}
	}
}
