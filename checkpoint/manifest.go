package checkpoint

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/pkg/errors"
)

// ManifestFormat is the format of the manifests this package writes.
const ManifestFormat = 1

// manifestName is the manifest's file name in a checkpoint directory.
const manifestName = "MANIFEST.json"

// Manifest describes one complete checkpoint. The caller fills everything
// but Format; Commit writes it last, after every shard is durable.
type Manifest struct {
	// Format is ManifestFormat (Commit sets it).
	Format int `json:"format"`
	// Step is the step the checkpoint was taken at (the minibatches
	// trained); the directory is named after it.
	Step int64 `json:"step"`
	// Fingerprint identifies the model and its cut into stages (opaque to
	// this package; Open's WithFingerprint compares it).
	Fingerprint string `json:"fingerprint"`
	// Config is the run's configuration as JSON (opaque).
	Config json.RawMessage `json:"config,omitempty"`
	// Data is where the run's data stood.
	Data DataPosition `json:"data"`
	// Random holds the state of each random stream the run draws from
	// (dropout masks, injected delays…), by name; opaque bytes.
	Random map[string][]byte `json:"random,omitempty"`
	// Stages are the shards, stage i's at index i, as WriteShard returned
	// them.
	Stages []FileInfo `json:"stages"`
}

// DataPosition is where a run stands in its data: the next minibatch is
// number Index (from 0) of epoch Epoch (from 1), whose order the shuffle
// seed Seed draws.
type DataPosition struct {
	Epoch int64 `json:"epoch"`
	Index int64 `json:"index"`
	Seed  int64 `json:"seed"`
}

// FileInfo is what a manifest records of one file.
type FileInfo struct {
	// Name is the file's name in the checkpoint directory.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Tensors are the file's tensors, sorted by name.
	Tensors []TensorInfo `json:"tensors"`
}

// readManifest reads and checks the manifest of the checkpoint directory
// dir.
func readManifest(dir string) (Manifest, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return Manifest{}, errors.Errorf("checkpoint: %s is not a checkpoint directory", dir)
	}
	path := filepath.Join(dir, manifestName)
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Manifest{}, errors.Wrapf(ErrIncomplete, "checkpoint: %s has no %s, which is written last: the run stopped while writing this checkpoint", dir, manifestName)
	}
	if err != nil {
		return Manifest{}, errors.Wrap(err, "checkpoint")
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, errors.Errorf("checkpoint: %s: not a manifest (%v): corrupted", path, err)
	}
	if m.Format != ManifestFormat {
		return Manifest{}, errors.Errorf("checkpoint: %s: format %d, this reader knows %d", path, m.Format, ManifestFormat)
	}
	if step, ok := parseStepName(filepath.Base(dir)); ok && step != m.Step {
		return Manifest{}, errors.Errorf("checkpoint: %s: the manifest of step %d in the directory of step %d", path, m.Step, step)
	}
	if err := m.check(); err != nil {
		return Manifest{}, errors.Wrapf(err, "checkpoint: %s", path)
	}
	return m, nil
}

// check validates what a manifest says of itself.
func (m Manifest) check() error {
	if m.Step < 0 {
		return errors.Errorf("step %d", m.Step)
	}
	if len(m.Stages) == 0 {
		return errors.New("no stages")
	}
	for i, fi := range m.Stages {
		if err := checkName(fi.Name, shardName(i)); err != nil {
			return err
		}
		if fi.Size < 0 || len(fi.SHA256) != 64 {
			return errors.Errorf("stage %d: size %d, SHA-256 %q", i, fi.Size, fi.SHA256)
		}
	}
	if len(m.Config) > 0 && !json.Valid(m.Config) {
		return errors.New("the configuration is not JSON")
	}
	return nil
}
