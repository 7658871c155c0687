//go:build unix

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/rundir"
)

func TestBenchPlacement(t *testing.T) {
	require.Equal(t, "2 stage processes, each pinned to a CPU", BenchPlacement(2, true))
	require.Equal(t, "3 stage processes", BenchPlacement(3, false))
	require.Equal(t, fmt.Sprintf("one process on %d CPUs", runtime.GOMAXPROCS(0)), BenchPlacement(0, false))
}

// fakeTrainScript is a shell script that stands in for pipemare train:
// given -out=DIR as $0, it writes DIR/report.json with samples/s $1
// and weights $2.
const fakeTrainScript = `d=${0#-out=}; mkdir -p "$d" && printf '{"result":{"weights_sha256":"%s","report":{"samples_per_sec":%s}},"settings":{}}' "$2" "$1" > "$d/report.json"`

// TestTrainChild: the child's report gives the run's samples/s and
// weights, and the report itself; a failing child's error has its
// standard error, and a report that cannot be read is an error naming it.
func TestTrainChild(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r, raw, err := TrainChild(context.Background(), "/bin/sh", []string{"-c", fakeTrainScript, "-out=" + dir, "250.5", "abc"}, dir)
	require.NoError(t, err)
	require.Equal(t, BenchRun{SamplesPerSec: 250.5, WeightsSHA256: "abc", Dir: dir}, r)
	require.JSONEq(t, `{"result":{"weights_sha256":"abc","report":{"samples_per_sec":250.5}},"settings":{}}`, string(raw))

	_, _, err = TrainChild(context.Background(), "/bin/sh", []string{"-c", "echo no such flag >&2; exit 2"}, dir)
	require.EqualError(t, err, "exit status 2: no such flag")
	_, _, err = TrainChild(context.Background(), "/bin/sh", []string{"-c", "true"}, t.TempDir())
	require.ErrorContains(t, err, "report.json: no such file")
	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "report.json"), []byte("{"), 0o644))
	_, _, err = TrainChild(context.Background(), "/bin/sh", []string{"-c", "true"}, bad)
	require.ErrorContains(t, err, filepath.Join(bad, "report.json"))
}

// TestRunChildren: each round's runs write into their own directory, the
// speed-up is theirs, and the report kept is the last placed run's, which
// Write writes with the bench beside it; different weights are reported,
// and an error once written.
func TestRunChildren(t *testing.T) {
	dir := t.TempDir()
	b := Bench{Placed: "p", Against: "a", probe: func() time.Duration { return 2 * time.Millisecond }} // a machine whose speed holds
	// "-out=DIR" is appended: the script's $0, then $1 and $2 are empty;
	// the placed script sets them.
	script := func(args ...string) ChildArgs {
		return func(out string) []string { return append(args, "-out="+out) }
	}
	placed := script("-c", `set -- 300 w; `+fakeTrainScript)
	against := script("-c", `set -- 100 w; `+fakeTrainScript)
	raw, err := b.RunChildren(context.Background(), "/bin/sh", placed, against, dir, 2, io.Discard)
	require.NoError(t, err)
	require.Len(t, b.Runs, 4)
	require.Equal(t, filepath.Join(dir, "placed-1"), b.Runs[3].Dir)
	require.Equal(t, filepath.Join(dir, "one-cpu-0"), b.Runs[1].Dir)
	require.FileExists(t, filepath.Join(dir, "one-cpu-1", "report.json"))
	require.Equal(t, 3.0, b.Speedup)
	require.True(t, b.SameWeights)
	var log strings.Builder
	out := rundir.Dir{Path: t.TempDir()}
	require.NoError(t, b.Write(out, raw, &log))
	require.Equal(t, "speed-up 3.00× (3.00–3.00 over the rounds): 300.0 samples/s p, 100.0 a\n", log.String())
	var rep map[string]any
	readJSON(t, filepath.Join(out.Path, "report.json"), &rep)
	require.Contains(t, rep, "result")
	require.Equal(t, "p", rep["speedup"].(map[string]any)["placed"])
	var bench Bench
	readJSON(t, filepath.Join(out.Path, "bench.json"), &bench)
	require.Equal(t, b.Runs, bench.Runs)
	require.ErrorContains(t, b.Write(out, []byte("[]"), &log), "the placed run's report.json")

	b.SameWeights = false
	log.Reset()
	require.EqualError(t, b.Write(out, raw, &log), "the runs on p and on a trained different weights")
	require.Contains(t, log.String(), "the runs trained different weights: the placement changed the arithmetic (a bug)")
	require.FileExists(t, filepath.Join(out.Path, "bench.json"), "written all the same")

	cores := Bench{AgainstKind: "cores"}
	_, err = cores.RunChildren(context.Background(), "/bin/sh", placed, against, t.TempDir(), 1, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"placed", "cores"}, []string{cores.Runs[0].Kind, cores.Runs[1].Kind}, "the other runs are of their kind")
	require.Equal(t, "cores-0", filepath.Base(cores.Runs[1].Dir))
	require.Equal(t, 3.0, cores.Speedup)

	_, err = (&Bench{}).RunChildren(context.Background(), "/bin/sh", script("-c", "exit 1"), against, dir, 1, io.Discard)
	require.ErrorContains(t, err, "placed run 0: exit status 1")
}

// readJSON decodes the JSON file at path into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}
