package checkpoint

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// ErrNoCheckpoint is returned (wrapped) by Latest when root holds no
// committed checkpoint.
var ErrNoCheckpoint = errors.New("no checkpoint")

// ErrIncomplete is returned (wrapped) by Open for a checkpoint directory
// without a manifest: a run stopped while writing it.
var ErrIncomplete = errors.New("incomplete checkpoint")

// Checkpoint is a complete checkpoint whose files Open verified.
type Checkpoint struct {
	Dir      string
	Manifest Manifest
}

// Shard reads stage's shard, checking it again against the manifest.
func (c *Checkpoint) Shard(stage int) (Shard, error) {
	if stage < 0 || stage >= len(c.Manifest.Stages) {
		return Shard{}, errors.Errorf("checkpoint: %s has stages 0..%d, not %d", c.Dir, len(c.Manifest.Stages)-1, stage)
	}
	return ReadShard(c.Dir, stage, c.Manifest.Stages[stage])
}

// OpenOption states what the caller expects of a checkpoint.
type OpenOption func(*openConfig)

type openConfig struct {
	fingerprint *string
	stages      int
	tensors     map[int][]TensorInfo
}

// WithFingerprint refuses a checkpoint of another model or plan.
func WithFingerprint(fp string) OpenOption { return func(c *openConfig) { c.fingerprint = &fp } }

// WithStages refuses a checkpoint of another number of stages.
func WithStages(p int) OpenOption { return func(c *openConfig) { c.stages = p } }

// WithTensors refuses a checkpoint whose shard of stage lacks one of want
// or holds it with another dtype or shape (it may hold more).
func WithTensors(stage int, want []TensorInfo) OpenOption {
	return func(c *openConfig) {
		if c.tensors == nil {
			c.tensors = map[int][]TensorInfo{}
		}
		c.tensors[stage] = append(c.tensors[stage], want...)
	}
}

// Open verifies the complete checkpoint in dir and returns it: its
// manifest, and every shard's size, SHA-256, structure and tensors
// against the manifest, and what opts expect. Any difference is an error
// naming the file and what differs. dir may also be a root that
// checkpoints were committed under: Open then opens the one its LATEST
// names (Latest). A checkpoint's directory without a manifest is
// ErrIncomplete; a root without LATEST, ErrNoCheckpoint.
func Open(dir string, opts ...OpenOption) (*Checkpoint, error) {
	if _, err := os.Stat(filepath.Join(dir, manifestName)); os.IsNotExist(err) {
		if _, err := os.Stat(filepath.Join(dir, latestName)); err == nil {
			return Latest(dir, opts...)
		}
		if _, step := parseStepName(filepath.Base(filepath.Clean(dir))); !step {
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				return nil, errors.Wrapf(ErrNoCheckpoint, "checkpoint: %s holds neither a %s (a checkpoint's directory) nor a %s (a root checkpoints were committed under)", dir, manifestName, latestName)
			}
		}
	}
	return open(dir, opts...)
}

// open is Open of a checkpoint's directory.
func open(dir string, opts ...OpenOption) (*Checkpoint, error) {
	var cfg openConfig
	for _, o := range opts {
		o(&cfg)
	}
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, manifestName)
	if cfg.fingerprint != nil && m.Fingerprint != *cfg.fingerprint {
		return nil, errors.Errorf("checkpoint: %s is of another model or plan: fingerprint %q, want %q", path, m.Fingerprint, *cfg.fingerprint)
	}
	if cfg.stages > 0 && len(m.Stages) != cfg.stages {
		return nil, errors.Errorf("checkpoint: %s has %d stages, want %d", path, len(m.Stages), cfg.stages)
	}
	for stage, want := range cfg.tensors {
		if stage < 0 || stage >= len(m.Stages) {
			return nil, errors.Errorf("checkpoint: %s has no stage %d", path, stage)
		}
		have := index(m.Stages[stage].Tensors)
		for _, w := range want {
			h, ok := have[w.Name]
			switch {
			case !ok:
				return nil, errors.Errorf("checkpoint: %s: stage %d has no tensor %q", filepath.Join(dir, m.Stages[stage].Name), stage, w.Name)
			case h.Dtype != w.Dtype || !tensor.Shape(h.Shape).Eq(tensor.Shape(w.Shape)):
				return nil, errors.Errorf("checkpoint: %s: tensor %q is %v %s, want %v %s", filepath.Join(dir, m.Stages[stage].Name), w.Name, tensor.Shape(h.Shape), h.Dtype, tensor.Shape(w.Shape), w.Dtype)
			}
		}
	}
	for i, fi := range m.Stages {
		if _, _, err := readTensors(filepath.Join(dir, fi.Name), shardFormat, i, &m.Stages[i]); err != nil {
			return nil, err
		}
	}
	return &Checkpoint{Dir: dir, Manifest: m}, nil
}

// Latest opens (Open) the checkpoint LATEST names under root. It does not
// fall back silently: if that checkpoint fails verification, the error
// says what failed and names the previous complete checkpoint, which the
// caller may Open explicitly. Without LATEST it is ErrNoCheckpoint.
func Latest(root string, opts ...OpenOption) (*Checkpoint, error) {
	name, err := readLatest(root)
	if os.IsNotExist(err) {
		return nil, errors.Wrapf(ErrNoCheckpoint, "checkpoint: %s has no %s: no checkpoint was committed there", root, latestName)
	}
	if err != nil {
		return nil, err
	}
	c, err := open(filepath.Join(root, name), opts...)
	if err == nil {
		return c, nil
	}
	step, _ := parseStepName(name)
	entries, lerr := List(root)
	if lerr != nil {
		return nil, err
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Complete && e.Step < step {
			return nil, errors.Wrapf(err, "checkpoint: the latest checkpoint of %s (step %d) is unusable; the previous complete one is %s: open it with checkpoint.Open", root, step, e.Dir)
		}
	}
	return nil, errors.Wrapf(err, "checkpoint: the latest checkpoint of %s (step %d) is unusable, and there is no earlier complete one", root, step)
}

// Entry is a checkpoint directory under a root.
type Entry struct {
	Step int64
	Dir  string
	// Complete reports whether it has a manifest (whether its files verify
	// is Open's to say).
	Complete bool
}

// List returns the checkpoint directories under root, oldest first.
func List(root string) ([]Entry, error) {
	des, err := os.ReadDir(root)
	if err != nil {
		return nil, errors.Wrap(err, "checkpoint")
	}
	var out []Entry
	for _, de := range des {
		step, ok := parseStepName(de.Name())
		if !ok || !de.IsDir() {
			continue
		}
		dir := filepath.Join(root, de.Name())
		_, err := os.Stat(filepath.Join(dir, manifestName))
		out = append(out, Entry{Step: step, Dir: dir, Complete: err == nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out, nil
}
