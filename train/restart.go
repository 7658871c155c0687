package train

import (
	"context"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/transport"
)

// Restart is one restart of a run's pipeline (Config.MaxRestarts): the
// pipeline failed, its engine was closed and its processes ended
// (Config.Disconnect), and the run went on from its last checkpoint with
// the pipeline connected anew. Its JSON form uses the names in the tags;
// durations are integer nanoseconds.
type Restart struct {
	// At is when the failure ended the pipeline.
	At time.Time `json:"at"`
	// Stage is the stage whose failure it was (its process died or
	// stalled, or its link broke), or -1 when the error names none.
	Stage int `json:"stage"`
	// Reason is the failure: the driver's error, and how Disconnect found
	// the processes ("stage 1 (pid 4242): signal: killed").
	Reason string `json:"reason"`
	// Checkpoint is the checkpoint the run resumed from ("" when there was
	// none yet: the run started again from its first step), FromStep the
	// minibatches it held.
	Checkpoint string `json:"checkpoint,omitempty"`
	FromStep   int    `json:"from_step"`
	// StepsRedone are the minibatches the failed pipeline had trained
	// since that checkpoint: lost, and trained again.
	StepsRedone int `json:"steps_redone"`
	// Took is the restart itself, the steps redone not counted: from the
	// failure until the restarted pipeline had resumed (the engine
	// closed, the processes ended and started, connected, the checkpoint
	// loaded).
	Took time.Duration `json:"took_ns"`
}

// attempt is what one attempt of Train records for the restarts: when it
// failed (zero: not in training). Resume, when set, is the checkpoint the
// attempt resumes from instead of Config.Resume; ready, when set, is
// called once its engine is ready to train (resumed).
type attempt struct {
	failed time.Time
	resume *string
	ready  func(time.Time)
}

// markReady says the attempt's engine is ready to train.
func (a *attempt) markReady() {
	if a.ready != nil {
		a.ready(time.Now())
	}
}

// withResume is cfg with the checkpoint a restart resumes from.
func (cfg Config) withResume(a *attempt) Config {
	if a.resume != nil {
		cfg.Resume = *a.resume
	}
	return cfg
}

// checkRestarts refuses restarts the run cannot make: without stages in
// other processes (Connect) or without checkpoints to resume from.
func (cfg Config) checkRestarts() error {
	switch {
	case cfg.MaxRestarts < 0:
		return errors.Errorf("train: %d restarts: a number of restarts, 0 for none", cfg.MaxRestarts)
	case cfg.MaxRestarts == 0:
		return nil
	case cfg.Connect == nil:
		return errors.Errorf("train: %d restarts of a pipeline whose stages run in this process (no Connect): a restart starts the stages' processes anew", cfg.MaxRestarts)
	case cfg.CheckpointEvery <= 0 || cfg.CheckpointDir == "":
		return errors.Errorf("train: %d restarts without checkpoints: a restart resumes from the last checkpoint; give CheckpointEvery and CheckpointDir", cfg.MaxRestarts)
	}
	return nil
}

// restarting runs once, the attempts of a run, until one ends without a
// failure a restart can mend or cfg.MaxRestarts restarts are spent; each
// restart resumes from the last checkpoint under cfg.CheckpointDir. It
// returns the last attempt's result, with the restarts.
func restarting(ctx context.Context, cfg Config, once func(*attempt) (*Result, error)) (*Result, error) {
	var restarts []Restart
	a := &attempt{}
	for {
		res, err := once(a)
		if res != nil {
			res.Restarts = restarts
		}
		if err == nil || len(restarts) >= cfg.MaxRestarts || !restartable(ctx, err) {
			return res, err
		}
		r := Restart{At: a.failed, Stage: failedStage(err), Reason: err.Error()}
		if r.At.IsZero() { // it failed before it trained: connecting, resuming
			r.At = time.Now()
		}
		if res != nil {
			r.StepsRedone = res.Steps()
		}
		if cfg.Disconnect != nil {
			if derr := cfg.Disconnect(err); derr != nil {
				r.Reason += "; " + strings.ReplaceAll(derr.Error(), "\n", "; ")
			}
		}
		dir, step, lerr := lastCheckpoint(cfg.CheckpointDir)
		if lerr != nil {
			return res, errors.Wrapf(err, "and no restart: %v", lerr)
		}
		r.Checkpoint, r.FromStep = dir, step
		if res != nil {
			r.StepsRedone = max(r.StepsRedone-step, 0)
		}
		restarts = append(restarts, r)
		a = &attempt{resume: &dir}
		if dir == "" { // no checkpoint yet: from the start
			a.resume = new(string)
		}
		a.ready = func(ready time.Time) {
			last := &restarts[len(restarts)-1]
			last.Took = ready.Sub(last.At)
			if cfg.Restarted != nil {
				cfg.Restarted(*last)
			}
		}
	}
}

// restartable reports whether err is a failure of the pipeline that a
// restart can mend: not a cancelled run, and not a stage's computation
// failing (asyncvm.StageError: it would fail again at the same step).
func restartable(ctx context.Context, err error) bool {
	var se *asyncvm.StageError
	return ctx.Err() == nil && !errors.As(err, &se)
}

// failedStage is the stage err names: a stage whose link broke, or -1.
func failedStage(err error) int {
	var le *transport.LinkError
	if errors.As(err, &le) {
		switch {
		case le.From >= 0:
			return int(le.From)
		case le.To >= 0:
			return int(le.To)
		}
	}
	return -1
}

// lastCheckpoint is the directory and step of the last complete
// checkpoint under root, or "" and 0 when none was committed yet.
func lastCheckpoint(root string) (string, int, error) {
	c, err := checkpoint.Latest(root)
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		return "", 0, nil
	case err != nil:
		return "", 0, errors.Wrapf(err, "the last checkpoint in %s", root)
	}
	return c.Dir, int(c.Manifest.Step), nil
}
