package train

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pkg/errors"
)

// savedConfig is what of a Config decides a run's results: a checkpoint
// records it, and a resumed run must have the same. Its keys are the run
// specification's where they name the same setting; a checkpoint written
// before holds keep_activations for stash (UnmarshalJSON reads both), and
// no kernels (it was exact: UnmarshalJSON reads it so).
type savedConfig struct {
	Model           string  `json:"model"`
	Schedule        string  `json:"schedule"`
	Stages          int     `json:"stages"`
	Cut             []int   `json:"cut,omitempty"`
	Microbatch      int     `json:"microbatch"`
	Microbatches    int     `json:"microbatches"`
	Epochs          int     `json:"epochs"`
	LR              float64 `json:"lr"`
	Cosine          bool    `json:"cosine"`
	StepDecay       bool    `json:"step_decay,omitempty"`
	Momentum        float64 `json:"momentum"`
	T1              int     `json:"t1"`
	T2              float64 `json:"t2"`
	Warmup          int     `json:"warmup"`
	Spike           bool    `json:"spike,omitempty"`
	Predict         bool    `json:"predict,omitempty"`
	NAdam           bool    `json:"nadam,omitempty"`
	Keep            bool    `json:"stash"`
	Kernels         string  `json:"kernels"`
	Seed            int64   `json:"seed"`
	CheckpointEvery int     `json:"checkpoint_every"`
	Examples        int     `json:"training_examples"`
}

// savedRenamed are savedConfig's keys before they were the spec's.
var savedRenamed = map[string]string{"keep_activations": "stash"}

// UnmarshalJSON reads a saved configuration, old keys included
// (savedRenamed).
func (s *savedConfig) UnmarshalJSON(b []byte) error {
	type plain savedConfig
	if err := runspec.DecodeRenamed(b, (*plain)(s), savedRenamed); err != nil {
		return err
	}
	if s.Kernels == "" {
		s.Kernels = string(graphsplit.ExactKernels)
	}
	return nil
}

func (c Config) savedConfig(model string, examples int) savedConfig {
	return savedConfig{
		Model: model, Schedule: c.Schedule.Name, Stages: c.Stages, Cut: c.Cut, Microbatch: c.Microbatch, Microbatches: c.Microbatches,
		Epochs: c.Epochs, LR: c.LR, Cosine: c.Cosine, StepDecay: c.StepDecay, Momentum: c.beta(), T1: c.T1, T2: c.T2, Warmup: c.Warmup,
		Spike: c.Spike, Predict: c.Predict, NAdam: c.NAdam,
		Keep: c.KeepActivations, Kernels: string(c.KernelMode()), Seed: c.Seed, CheckpointEvery: c.CheckpointEvery, Examples: examples,
	}
}

// savedRun is what a checkpoint's manifest carries of a run besides its
// stages (in Manifest.Config): the configuration, the run specification
// it was made from (Config.Spec; absent when the Config was built
// without one, and in checkpoints written before manifests carried it),
// and the epochs so far, so that a resumed run reports the whole run.
// A resume compares the configurations, not the specifications: two
// specifications that resolve to one configuration are one run.
type savedRun struct {
	Config savedConfig   `json:"config"`
	Spec   *runspec.Spec `json:"spec,omitempty"`
	Epochs []EpochResult `json:"epochs"`
}

// manifest is the checkpoint manifest of a run of spec (nil: none) at the
// start of minibatch index (from 0) of epoch (from 1), epochs holding the
// epochs so far.
func manifest(rc savedConfig, spec *runspec.Spec, epochs []EpochResult, epoch, index int) (checkpoint.Manifest, error) {
	b, err := json.Marshal(savedRun{Config: rc, Spec: spec, Epochs: epochs})
	if err != nil {
		return checkpoint.Manifest{}, errors.Wrap(err, "train: checkpoint")
	}
	return checkpoint.Manifest{Config: b, Data: checkpoint.DataPosition{Epoch: int64(epoch), Index: int64(index), Seed: rc.Seed}}, nil
}

// resumed reads a run's position back from a manifest, refusing one whose
// configuration differs from rc (say which).
func resumed(m *checkpoint.Manifest, rc savedConfig) (epochs []EpochResult, epoch, index int, err error) {
	var s savedRun
	if err := json.Unmarshal(m.Config, &s); err != nil {
		return nil, 0, 0, errors.Wrap(err, "train: the checkpoint's configuration")
	}
	if d := runspec.Diff(s.Config, rc); d != nil {
		return nil, 0, 0, &runspec.DiffError{Before: "train: the checkpoint was taken by another run: ", Differences: d, After: "; resume with the same settings"}
	}
	return s.Epochs, int(m.Data.Epoch), int(m.Data.Index), nil
}

// saveCheckpoint writes a checkpoint of the run, whose next minibatch is
// number index of epoch after step steps, and tells cfg.Checkpointed.
func saveCheckpoint(ctx context.Context, vm *asyncvm.VM, cfg Config, rc savedConfig, epochs []EpochResult, step, epoch, index int) error {
	var spec *runspec.Spec
	if cfg.Spec.Model != "" {
		spec = &cfg.Spec
	}
	m, err := manifest(rc, spec, epochs, epoch, index)
	if err != nil {
		return err
	}
	dir, err := vm.Checkpoint(ctx, cfg.CheckpointDir, m, cfg.CheckpointKeep)
	if dir != "" && cfg.Checkpointed != nil { // committed, even if pruning failed
		cfg.Checkpointed(step, dir)
	}
	return errors.Wrap(err, "train: checkpoint")
}

// checkpointDir is dir itself when it holds a checkpoint, or the one its
// LATEST names.
func checkpointDir(dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "LATEST")); err == nil {
		c, err := checkpoint.Latest(dir)
		if err != nil {
			return "", err
		}
		return c.Dir, nil
	}
	return dir, nil
}
