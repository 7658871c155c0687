package runout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// smallData is the first 640 training and 100 test images.
func smallData(t *testing.T) (zoo.Data, zoo.Data) {
	t.Helper()
	images, test, err := zoo.LoadFashionMNIST("embedded")
	require.NoError(t, err)
	return images.Head(640), test.Head(100)
}

// smallConfig is one epoch of the MLP at fine grain: 10 steps.
func smallConfig(s schedule.Schedule) train.Config {
	return train.Config{Hyper: zoo.Hyper{Microbatch: 16, Microbatches: 4, Epochs: 1, LR: 0.03, Seed: 1}, Schedule: s}
}

// TestTrainRun: a fresh run writes its settings before it trains, then
// its report, trace, plots and model; a resumed one goes on from its
// checkpoint and says so; a run that trained nothing writes nothing.
func TestTrainRun(t *testing.T) {
	trainSet, test := smallData(t)
	out := filepath.Join(t.TempDir(), "run")
	cfg := smallConfig(schedule.PipeMare())
	cfg.CheckpointEvery = 5
	st := rundir.NewSettings(runspec.Spec{Model: "mlp", Data: "embedded"}, cfg, trainSet.Len(), test.Len())
	var log strings.Builder
	run, err := StartTrainRun(out, "", rundir.Fresh, st, &cfg, 1, &log)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(out, rundir.SettingsFile))
	abs, err := filepath.Abs(filepath.Join(out, rundir.CheckpointsDir))
	require.NoError(t, err)
	require.Equal(t, abs, cfg.CheckpointDir)
	require.NoError(t, run.Finish(nil, &log))
	require.NoFileExists(t, filepath.Join(out, "report.json"), "nothing trained, nothing written")

	res, err := train.Train(context.Background(), zoo.MLP, trainSet, test, cfg)
	require.NoError(t, err)
	require.NoError(t, run.Finish(res, &log))
	for _, f := range append([]string{"report.json", "trace.json", rundir.ModelFile}, PlotFiles...) {
		require.FileExists(t, filepath.Join(out, f))
	}
	require.Contains(t, log.String(), "checkpoint at step 5: ")
	require.True(t, strings.HasSuffix(log.String(), "wrote "+out+"/report.json, "+rundir.ModelFile+", trace.json and plots\n"), log.String())

	root, from := rundir.ResumeTarget(out, "")
	log.Reset()
	cfg = smallConfig(schedule.PipeMare())
	cfg.CheckpointEvery = 5
	_, err = StartTrainRun(root, from, rundir.Resume, st, &cfg, 1, &log)
	require.ErrorIs(t, err, rundir.ErrFinished, "a finished run is not trained again")
	require.NoError(t, os.Remove(filepath.Join(out, "report.json"))) // a run stopped before its report
	run, err = StartTrainRun(root, from, rundir.Resume, st, &cfg, 1, &log)
	require.NoError(t, err)
	require.NotEmpty(t, cfg.Resume)
	require.Equal(t, int64(10), run.Report.Resumed.Step)
	require.Contains(t, log.String(), "resuming from "+cfg.Resume+": step 10 (epoch ")

	_, err = StartTrainRun(out, "", rundir.Fresh, st, &cfg, 1, &log)
	require.ErrorContains(t, err, "holds the checkpoints of an earlier run", "a fresh run refuses to replace them")
	empty := filepath.Join(t.TempDir(), "empty")
	log.Reset()
	_, err = StartTrainRun(empty, filepath.Join(empty, rundir.CheckpointsDir), rundir.ResumeIfAny, st, &cfg, 1, &log)
	require.NoError(t, err)
	require.Equal(t, "no checkpoint in "+empty+" yet: starting the run there\n", log.String())
}

// TestComparison: the runs train one after the other into the report,
// the table and a trace each; a failing run ends the comparison, named,
// with the runs before it written; with none trained nothing is.
func TestComparison(t *testing.T) {
	trainSet, test := smallData(t)
	runs := []Compared{{Label: "gpipe", Config: smallConfig(schedule.GPipe())}, {Label: "pipemare", Config: smallConfig(schedule.PipeMare())}, {Label: "1f1b", Config: smallConfig(schedule.OneFOneB())}}
	var log strings.Builder
	c := Comparison{Model: "mlp", Target: 0.5, TraceSteps: 1, Log: &log,
		Train: func(ctx context.Context, cfg train.Config) (*train.Result, error) {
			if cfg.Schedule.Name == schedule.OneFOneB().Name {
				return nil, errors.New("boom")
			}
			return train.Train(ctx, zoo.MLP, trainSet, test, cfg)
		},
		Settings: func(cfg train.Config) rundir.Settings {
			return rundir.NewSettings(runspec.Spec{Model: "mlp", Data: "embedded"}, cfg, trainSet.Len(), test.Len())
		}}
	out := rundir.Dir{Path: t.TempDir()}
	err := c.Run(context.Background(), out.Path, runs)
	require.EqualError(t, err, "1f1b: boom")
	require.Contains(t, log.String(), "running gpipe…\n")
	require.Contains(t, log.String(), "running 1f1b…\n")
	require.Contains(t, log.String(), "wrote "+out.Path+"/report.json, a trace per schedule and plots\n")
	require.FileExists(t, filepath.Join(out.Path, runs[0].TraceFile()))
	require.FileExists(t, filepath.Join(out.Path, runs[1].TraceFile()))
	require.NoFileExists(t, filepath.Join(out.Path, runs[2].TraceFile()))
	b, err := os.ReadFile(filepath.Join(out.Path, "report.json"))
	require.NoError(t, err)
	require.Contains(t, string(b), `"label": "pipemare"`)

	empty := t.TempDir()
	require.EqualError(t, c.Run(context.Background(), empty, runs[2:]), "1f1b: boom")
	require.NoFileExists(t, filepath.Join(empty, "report.json"))
	file := filepath.Join(empty, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	log.Reset()
	require.ErrorContains(t, c.Run(context.Background(), filepath.Join(file, "out"), runs), "out ")
	require.Empty(t, log.String(), "a directory that cannot be written is refused before anything trains")
}

// TestChooseCut: a cut given or recorded is kept, fine grain needs none,
// a number of stages is measured when this process drives them all and
// estimated otherwise.
func TestChooseCut(t *testing.T) {
	trainSet, _ := smallData(t)
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	var log strings.Builder
	cfg := train.Config{Hyper: r.Run, Cut: []int{5}, Stages: 2}
	require.NoError(t, ChooseCut(&cfg, launch.InProcess, launch.TransportAuto, "", r, trainSet, &log))
	require.Equal(t, []int{5}, cfg.Cut)
	cfg = train.Config{Hyper: r.Run}
	require.NoError(t, ChooseCut(&cfg, launch.InProcess, launch.TransportAuto, "", r, trainSet, &log))
	require.Nil(t, cfg.Cut)
	require.Empty(t, log.String())

	cfg = train.Config{Hyper: r.Run, Stages: 2}
	require.NoError(t, ChooseCut(&cfg, launch.Remote, launch.TransportAuto, "", r, trainSet, &log))
	require.Nil(t, cfg.Cut)
	require.Equal(t, "2 stages cut by the cost estimate, alike on every host (pipemare plan measures a balanced cut of 2 stages, to give every host as the cut)\n", log.String())

	log.Reset()
	require.NoError(t, ChooseCut(&cfg, launch.InProcess, launch.TransportAuto, "", r, trainSet, &log))
	require.Len(t, cfg.Cut, 1)
	require.Regexp(t, `^2 stages cut at ops \d+, balanced on this machine: `, log.String())

	dir := t.TempDir()
	st := rundir.NewSettings(runspec.Spec{Model: "mlp", Data: "embedded", Stages: "2"}, train.Config{Hyper: r.Run, Stages: 2, Cut: []int{4}}, 640, 100)
	require.NoError(t, rundir.Dir{Path: dir}.WriteSettings(st))
	cfg = train.Config{Hyper: r.Run, Stages: 2}
	require.NoError(t, ChooseCut(&cfg, launch.InProcess, launch.TransportAuto, dir, r, trainSet, &log))
	require.Equal(t, []int{4}, cfg.Cut, "the resumed run's cut")
}
