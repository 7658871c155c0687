package experiment

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/pkg/errors"
)

// Trainer trains one run: train.Train, or a stand-in in tests.
type Trainer func(ctx context.Context, build zoo.Builder, train, test zoo.Data, cfg train.Config) (*train.Result, error)

// diverged matches the errors of a run whose loss stopped being finite.
var diverged = regexp.MustCompile(`not finite|the loss is`)

// trainRun trains run, planned as pl, and returns its record: a refused
// run and a diverged one are records too; any other failure, an
// interruption included, is an error and leaves no record. With
// checkpoints the run writes them into the work directory work/<key> and,
// when one is there, goes on from it (bit-identically: train.Config.Resume);
// the directory is removed once the run is recorded.
func (s *Sweep) trainRun(ctx context.Context, run Run, pl plan) (*Record, error) {
	key := run.Key()
	rec := &Record{Method: run.Variant.String(), Setting: run.Setting.Label, Epochs: run.Epochs, Seed: run.Seed,
		Spec: pl.spec, CheckpointEvery: s.CheckpointEvery, Steps: pl.steps, Warmup: pl.cfg.Warmup, T1: pl.cfg.T1}
	if pl.cfg.Schedule.Async {
		rec.AsyncSteps = pl.steps - pl.cfg.Warmup
	}
	if pl.refused != "" {
		rec.Refused = pl.refused
		return rec, nil
	}
	cfg := pl.cfg
	work := filepath.Join(s.Work, key)
	resumes := work + ".resumed.json" // the steps it went on from, over sessions
	if cfg.CheckpointEvery > 0 {
		cfg.CheckpointDir = work
		step, err := latestStep(work)
		switch {
		case err != nil:
			s.logf("%s: %v; training it afresh", key, err)
			if err := os.RemoveAll(work); err != nil {
				return nil, errors.Wrapf(err, "%s", key)
			}
		case step > 0:
			cfg.Resume = work
			_ = readJSON(resumes, &rec.ResumedAt) // a lost list loses only this note
			rec.ResumedAt = append(rec.ResumedAt, step)
			if err := writeJSON(resumes, rec.ResumedAt); err != nil {
				return nil, errors.Wrapf(err, "%s", key)
			}
			s.logf("%s: going on from its checkpoint at step %d of %d", key, step, pl.steps)
		}
	}
	res, err := s.trainer()(ctx, s.Recipe.Build, s.TrainData, s.TestData, cfg)
	switch {
	case err != nil && ctx.Err() == nil && diverged.MatchString(err.Error()):
		rec.Diverged = err.Error()
	case err != nil:
		return nil, errors.Wrapf(err, "%s", key)
	default:
		rec.fill(res, s.Target)
	}
	if err := os.RemoveAll(work); err != nil {
		return nil, errors.Wrapf(err, "%s", key)
	}
	return rec, errors.Wrapf(removeIfThere(resumes), "%s", key)
}

// latestStep is the step of the newest checkpoint under root: 0 when there
// is none, an error when there is one that cannot be read.
func latestStep(root string) (int, error) {
	if _, err := os.Stat(filepath.Join(root, "LATEST")); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	c, err := checkpoint.Latest(root)
	if err != nil {
		return 0, errors.Wrap(err, "its checkpoint cannot be read")
	}
	return int(c.Manifest.Step), nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON writes v, indented, to path atomically.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrap(err, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return checkpoint.WriteFile(path, append(b, '\n'))
}

func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
