package rundir_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// TestPrepareChecksEveryFile: Prepare creates the directory and leaves no
// file behind but those that were there; a file it cannot write is an
// error naming it, before anything trains.
func TestPrepareChecksEveryFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	d := rundir.Dir{Path: dir, Files: []string{"report.json", "trace.json"}}
	require.NoError(t, d.Prepare())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the files it created to check are gone")

	require.NoError(t, os.Mkdir(filepath.Join(dir, "trace.json"), 0o755)) // a directory where a file goes
	require.ErrorContains(t, d.Prepare(), "out "+dir+": cannot write trace.json")

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.ErrorContains(t, rundir.Dir{Path: file}.Prepare(), "out "+file+": mkdir "+file+": not a directory")
}

// checkpointedRun trains the MLP for 2 epochs of 3 steps into out, with a
// checkpoint every 2 steps, its settings written first, and returns them.
func checkpointedRun(t *testing.T, out string) rundir.Settings {
	t.Helper()
	images, test, err := zoo.LoadFashionMNIST("embedded")
	require.NoError(t, err)
	data, test := images.Head(192), test.Head(100)
	cfg := train.Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 2, LR: 0.03, Seed: 1}, Schedule: schedule.PipeMare()}
	cfg.CheckpointEvery, cfg.CheckpointDir = 2, filepath.Join(out, rundir.CheckpointsDir)
	st := rundir.NewSettings(runspec.Spec{Model: "mlp", Data: "embedded", Method: "naive"}, cfg, data.Len(), test.Len())
	require.NoError(t, rundir.Dir{Path: out}.Prepare())
	require.NoError(t, rundir.Dir{Path: out}.WriteSettings(st))
	_, err = train.Train(context.Background(), zoo.MLP, data, test, cfg)
	require.NoError(t, err)
	return st
}

// TestStartPoint: a fresh run refuses a directory holding checkpoints; a
// resume continues the latest, refuses other settings naming the flags,
// and a directory with no checkpoint or none at all, naming it; resume
// auto starts afresh where there is nothing to continue.
func TestStartPoint(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	st := checkpointedRun(t, out)

	_, err := rundir.StartPoint(out, filepath.Join(out, rundir.CheckpointsDir), rundir.Fresh, st)
	require.ErrorContains(t, err, "out "+out+": holds the checkpoints of an earlier run")

	runDir, from := rundir.ResumeTarget(out, "ignored")
	require.Equal(t, out, runDir)
	c, err := rundir.StartPoint(runDir, from, rundir.Resume, st)
	require.NoError(t, err)
	require.Equal(t, int64(6), c.Manifest.Step, "the latest checkpoint: 6 steps")

	one := c.Dir
	runDir, from = rundir.ResumeTarget(one, "ignored")
	require.Equal(t, out, runDir, "a checkpoint's run is two directories up")
	require.Equal(t, one, from)

	other := st
	other.LR, other.Seed = 0.05, 2
	_, err = rundir.StartPoint(out, filepath.Join(out, rundir.CheckpointsDir), rundir.Resume, other)
	require.ErrorContains(t, err, "resume "+out+": the run was started with other settings: lr 0.03 there, 0.05 here; seed 1 there, 2 here; resume with the settings it was started with")

	old := st
	old.Spec = nil // a settings.json written before runs carried their spec
	require.NoError(t, rundir.Dir{Path: out}.WriteSettings(old))
	c, err = rundir.StartPoint(out, filepath.Join(out, rundir.CheckpointsDir), rundir.Resume, st)
	require.NoError(t, err, "an old settings.json still resumes: the resolved settings decide")
	require.Equal(t, int64(6), c.Manifest.Step)

	// A settings.json written before its keys were the spec's: microbatch_rows,
	// t1_steps, t2_gamma, warmup_steps; and before it named the kernel
	// mode (then always exact).
	b, err := json.Marshal(old)
	require.NoError(t, err)
	renamed := strings.NewReplacer(`"microbatch":`, `"microbatch_rows":`, `"t1":`, `"t1_steps":`, `"t2":`, `"t2_gamma":`, `"warmup":`, `"warmup_steps":`, `"kernels":"exact",`, "").Replace(string(b))
	require.Contains(t, renamed, `"t1_steps":`)
	require.NotContains(t, renamed, `"kernels"`)
	settingsFile := filepath.Join(out, rundir.SettingsFile)
	require.NoError(t, os.WriteFile(settingsFile, []byte(renamed), 0o644))
	_, err = rundir.StartPoint(out, filepath.Join(out, rundir.CheckpointsDir), rundir.Resume, st)
	require.NoError(t, err, "old keys read as the new")
	longer := st
	longer.T1Steps++
	_, err = rundir.StartPoint(out, filepath.Join(out, rundir.CheckpointsDir), rundir.Resume, longer)
	require.ErrorContains(t, err, fmt.Sprintf("the run was started with other settings: t1 %d there, %d here", st.T1Steps, longer.T1Steps))
	fast := st
	fast.Kernels = "fast"
	_, err = rundir.StartPoint(out, filepath.Join(out, rundir.CheckpointsDir), rundir.Resume, fast)
	require.ErrorContains(t, err, "the run was started with other settings: kernels exact there, fast here")

	empty := t.TempDir()
	_, err = rundir.StartPoint(empty, filepath.Join(empty, rundir.CheckpointsDir), rundir.Resume, st)
	require.ErrorContains(t, err, "no checkpoint in "+filepath.Join(empty, rundir.CheckpointsDir)+" to continue from")
	c, err = rundir.StartPoint(empty, filepath.Join(empty, rundir.CheckpointsDir), rundir.ResumeIfAny, st)
	require.NoError(t, err)
	require.Nil(t, c, "resume auto: nothing to continue, a fresh start")

	missing := filepath.Join(empty, "typo")
	_, err = rundir.StartPoint(missing, filepath.Join(missing, rundir.CheckpointsDir), rundir.Resume, st)
	require.ErrorContains(t, err, "resume "+missing+": stat "+missing)
	_, statErr := os.Stat(missing)
	require.True(t, os.IsNotExist(statErr), "a mistyped -resume creates nothing")

	require.Equal(t, []int(nil), rundir.RecordedCut(out), "the settings record no cut for fine stages")
}
