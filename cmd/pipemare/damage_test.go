package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/rundir"

	"github.com/stretchr/testify/require"
)

// train runs pipemare train in this process and fails unless it exits 0.
func trainRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := runCLI(context.Background(), append([]string{"train"}, args...)...)
	require.Equal(t, 0, code, "%v\n%s\n%s", args, out, stderr)
	return out
}

// trainFails runs pipemare train and returns the first line of its error.
func trainFails(t *testing.T, code int, args ...string) string {
	t.Helper()
	got, out, stderr := runCLI(context.Background(), append([]string{"train"}, args...)...)
	require.Equal(t, code, got, "%v\n%s\n%s", args, out, stderr)
	require.NotRegexp(t, `(?m)^epoch \d+:`, out, "nothing trained")
	first, _, _ := strings.Cut(stderr, "\n")
	return first
}

// TestResumeRefusesDamage: a checkpoint with a truncated shard, a
// corrupted shard, no manifest, or one of another plan, is refused with an
// error naming the file and what differs, and naming the previous
// complete checkpoint, from which -resume then goes on to the weights of
// the run left alone. A resume with other flags names the flag; a fresh
// run is refused where it would replace checkpoints; a -resume of a
// directory with no checkpoint is refused, naming it, and creates nothing;
// -resume auto starts the run there, and resumes it the next time.
func TestResumeRefusesDamage(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("trainings (several seconds each under the race detector)")
	}
	args := append([]string{"-checkpoint-every", "3"}, mlpArgs...)
	run := t.TempDir()
	out := trainRun(t, append(args, "-out", run)...)
	require.Equal(t, []int{3, 6, 9, 12, 15}, checkpointSteps(out))
	want := reportOf(t, run)
	other := t.TempDir() // the same model cut into two stages: another plan
	trainRun(t, append(append([]string{"-stages", "2"}, args...), "-out", other)...)

	latest := filepath.Join(run, rundir.CheckpointsDir, stepDir(15))
	prev := filepath.Join(run, rundir.CheckpointsDir, stepDir(12))
	shard := filepath.Join(latest, "stage-001.safetensors")
	for _, c := range []struct {
		name   string
		damage func(dir string)
		msg    string
	}{
		{"truncated shard", func(dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, rel(t, run, shard)), 100))
		}, `stage-001\.safetensors: 100 bytes, the manifest says \d+ \(truncated or rewritten\)`},
		{"corrupted shard", func(dir string) {
			path := filepath.Join(dir, rel(t, run, shard))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			b[len(b)-5] ^= 0x40 // a bit of the last weight
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}, `stage-001.safetensors: SHA-256 [0-9a-f]+, the manifest says [0-9a-f]+`},
		{"missing manifest", func(dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, rel(t, run, latest), "MANIFEST.json")))
		}, `step-000000000015 has no MANIFEST\.json, which is written last: the run stopped while writing this checkpoint`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			require.NoError(t, os.CopyFS(dir, os.DirFS(run)))
			require.NoError(t, os.Remove(filepath.Join(dir, "report.json"))) // a run that stopped before its end
			c.damage(dir)
			first := trainFails(t, 1, append(args, "-resume", dir)...)
			require.Regexp(t, c.msg, first)
			require.Contains(t, first, filepath.Join(dir, rel(t, run, latest)), "names the checkpoint")
			before := filepath.Join(dir, rel(t, run, prev))
			require.Contains(t, first, "the previous complete checkpoint is "+before+": continue from it with -resume "+before)
			out := trainRun(t, append(args, "-resume", before)...)
			require.Equal(t, 12, resumedStep(t, out))
			requireSameRun(t, want, reportOf(t, dir))
		})
	}

	t.Run("another plan", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		require.NoError(t, os.CopyFS(dir, os.DirFS(run)))
		require.NoError(t, os.Remove(filepath.Join(dir, "report.json"))) // a run that stopped before its end
		require.NoError(t, os.RemoveAll(filepath.Join(dir, rundir.CheckpointsDir)))
		require.NoError(t, os.CopyFS(filepath.Join(dir, rundir.CheckpointsDir), os.DirFS(filepath.Join(other, rundir.CheckpointsDir))))
		first := trainFails(t, 1, append(args, "-resume", dir)...)
		require.Regexp(t, `MANIFEST.json is of another model or plan: fingerprint "[0-9a-f]+", want "[0-9a-f]+"`, first)
		require.Contains(t, first, filepath.Join(dir, rundir.CheckpointsDir, stepDir(15)))
	})

	t.Run("other flags", func(t *testing.T) {
		first := trainFails(t, 1, append(append(args, "-resume", run), "-lr", "0.05", "-seed", "2")...)
		require.Contains(t, first, "-resume "+run+": the run was started with other settings: -lr (lr) 0.03 there, 0.05 here; -seed (seed) 1 there, 2 here")
		first = trainFails(t, 1, append(args[2:], "-resume", run)...)
		require.Contains(t, first, "-checkpoint-every (checkpoint_every) 3 there, 0 here")
	})

	t.Run("a fresh run where checkpoints are", func(t *testing.T) {
		first := trainFails(t, 1, append(args, "-out", run)...)
		require.Contains(t, first, "-out "+run+": holds the checkpoints of an earlier run ("+filepath.Join(run, rundir.CheckpointsDir)+", latest step 15): continue it with -resume "+run)
	})

	t.Run("nothing to resume yet", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "new")
		first := trainFails(t, 1, append(args, "-resume", dir)...)
		require.Contains(t, first, "-resume "+dir+": ", "a mistyped -resume names the directory")
		require.Contains(t, first, "(a new run is -out "+dir+")")
		_, err := os.Stat(dir)
		require.True(t, os.IsNotExist(err), "and creates nothing")

		// What a launcher that restarts the whole job gives (-resume auto).
		out := trainRun(t, append(args, "-out", dir, "-resume", rundir.ResumeAuto)...)
		require.Contains(t, out, "no checkpoint in "+dir+" yet: starting the run there")
		got := reportOf(t, dir)
		require.Equal(t, want.Result.WeightsSHA256, got.Result.WeightsSHA256)
		require.Nil(t, got.Resumed)
		report, err := os.ReadFile(filepath.Join(dir, "report.json"))
		require.NoError(t, err)
		for _, resume := range []string{rundir.ResumeAuto, dir} { // restarted once the run finished
			out = trainRun(t, append(args, "-out", dir, "-resume", resume)...)
			require.Equal(t, "the run in "+dir+" is complete (report.json: weights_sha256 "+want.Result.WeightsSHA256+"; model.safetensors written): nothing to resume; a new run needs another -out\n", out, "nothing trains")
			again, err := os.ReadFile(filepath.Join(dir, "report.json"))
			require.NoError(t, err)
			require.Equal(t, report, again, "the report stays the run's")
		}
		require.NoError(t, os.Remove(filepath.Join(dir, "report.json"))) // killed before its report: it resumes
		out = trainRun(t, append(args, "-out", dir, "-resume", rundir.ResumeAuto)...)
		require.Equal(t, 15, resumedStep(t, out), "then it resumes")
		requireSameRun(t, want, reportOf(t, dir))
	})
}

// rel is path relative to dir.
func rel(t *testing.T, dir, path string) string {
	r, err := filepath.Rel(dir, path)
	require.NoError(t, err)
	return r
}
