package checkpoint

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/internal/faultpoint"
	"github.com/pkg/errors"
)

// latestName is the file naming the newest committed checkpoint.
const latestName = "LATEST"

// stepName is the directory name of the checkpoint at step.
func stepName(step int64) string { return fmt.Sprintf("step-%012d", step) }

func parseStepName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, "step-")
	if !ok || len(digits) < 12 {
		return 0, false
	}
	step, err := strconv.ParseInt(digits, 10, 64)
	return step, err == nil && step >= 0 && stepName(step) == name
}

// Begin makes the directory of the checkpoint at step under root (created
// if need be) and returns it; the stages then write their shards in it
// (WriteShard) and the coordinator commits it (Commit). A directory
// already there at that step (a run that stopped before committing it, or
// that was resumed from an older checkpoint and reached the step again)
// is emptied first; if LATEST names it, LATEST is first moved back,
// durably, to the newest complete checkpoint before it, so that it always
// names a complete checkpoint.
func Begin(root string, step int64) (string, error) {
	if step < 0 {
		return "", errors.Errorf("checkpoint: step %d", step)
	}
	if _, err := os.Stat(root); os.IsNotExist(err) {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return "", errors.Wrap(err, "checkpoint")
		}
		if err := syncDir(filepath.Dir(filepath.Clean(root))); err != nil {
			return "", err
		}
	}
	if latest, err := readLatest(root); err == nil && latest == stepName(step) {
		if err := stepBack(root, step); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(root, stepName(step))
	if _, err := os.Stat(dir); err == nil {
		if err := remove(root, stepName(step)); err != nil {
			return "", err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", errors.Wrap(err, "checkpoint")
	}
	return dir, syncDir(root)
}

// CommitOption configures Commit.
type CommitOption func(*commitConfig)

type commitConfig struct{ keep int }

// Keep sets how many complete checkpoints Commit keeps, the new one
// included (default 2: the newest and one to fall back on).
func Keep(k int) CommitOption { return func(c *commitConfig) { c.keep = k } }

// Commit makes the checkpoint at m.Step under root complete, once every
// stage's WriteShard has returned: it checks that every shard m lists is
// there with its size and fsyncs it, writes the manifest (atomically and
// durably, last), points LATEST at the checkpoint the same way, and then
// removes what the run no longer needs: checkpoints beyond the newest
// Keep complete ones, incomplete ones older than this one, and any newer
// than this one (left by the branch of a run that was resumed from an
// older checkpoint), and temporary files. It returns the checkpoint's
// directory. If the removals fail, the checkpoint is committed all the
// same and the error says so.
func Commit(root string, m Manifest, opts ...CommitOption) (string, error) {
	cfg := commitConfig{keep: 2}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.keep < 1 {
		return "", errors.Errorf("checkpoint: Keep(%d): keep at least the new checkpoint", cfg.keep)
	}
	m.Format = ManifestFormat
	if err := m.check(); err != nil {
		return "", errors.Wrapf(err, "checkpoint: the manifest of step %d", m.Step)
	}
	name := stepName(m.Step)
	dir := filepath.Join(root, name)
	if _, err := os.Stat(dir); err != nil {
		return "", errors.Wrapf(err, "checkpoint: step %d was not begun (Begin)", m.Step)
	}
	for i, fi := range m.Stages {
		path := filepath.Join(dir, fi.Name)
		st, err := os.Stat(path)
		if err != nil {
			return "", errors.Wrapf(err, "checkpoint: stage %d's shard", i)
		}
		if st.Size() != fi.Size {
			return "", errors.Errorf("checkpoint: %s has %d bytes, stage %d reported %d", path, st.Size(), i, fi.Size)
		}
		if err := syncFile(path); err != nil {
			return "", err
		}
	}
	faultpoint.Reach(faultpoint.Point{Name: faultpoint.BeforeManifest, Step: m.Step, Stage: -1})
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", errors.Wrap(err, "checkpoint: encoding the manifest")
	}
	if _, _, err := writeAtomic(dir, manifestName, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return "", err
	}
	faultpoint.Reach(faultpoint.Point{Name: faultpoint.BeforeLatest, Step: m.Step, Stage: -1})
	if err := writeLatest(root, name); err != nil {
		return "", err
	}
	if err := prune(root, m.Step, cfg.keep); err != nil {
		return dir, errors.Wrapf(err, "checkpoint: step %d is committed, but removing what it replaces failed", m.Step)
	}
	return dir, nil
}

// prune removes what the checkpoint just committed at step replaces.
func prune(root string, step int64, keep int) error {
	entries, err := List(root)
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Step > entries[j].Step })
	kept := 0
	for _, e := range entries {
		switch {
		case e.Step == step:
			kept++
			if err := removeTemps(e.Dir); err != nil {
				return err
			}
			continue
		case e.Step < step && e.Complete && kept < keep:
			kept++
			continue
		}
		if err := remove(root, filepath.Base(e.Dir)); err != nil {
			return err
		}
	}
	return removeTemps(root)
}

// stepBack points LATEST at the newest complete checkpoint before step,
// or removes it if there is none.
func stepBack(root string, step int64) error {
	entries, err := List(root)
	if err != nil {
		return err
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Complete && e.Step < step {
			return writeLatest(root, filepath.Base(e.Dir))
		}
	}
	if err := os.Remove(filepath.Join(root, latestName)); err != nil {
		return errors.Wrap(err, "checkpoint")
	}
	return syncDir(root)
}

// writeLatest points LATEST at the checkpoint directory name, atomically.
func writeLatest(root, name string) error {
	_, _, err := writeAtomic(root, latestName, func(w io.Writer) error {
		_, err := io.WriteString(w, name+"\n")
		return err
	})
	return err
}

// remove deletes the checkpoint directory name under root so that a crash
// midway leaves an incomplete checkpoint, never a complete-looking part of
// one: its manifest goes first, durably.
func remove(root, name string) error {
	dir := filepath.Join(root, name)
	if err := os.Remove(filepath.Join(dir, manifestName)); err == nil {
		if err := syncDir(dir); err != nil {
			return err
		}
	} else if !os.IsNotExist(err) {
		return errors.Wrap(err, "checkpoint")
	}
	if err := os.RemoveAll(dir); err != nil {
		return errors.Wrap(err, "checkpoint")
	}
	return syncDir(root)
}

// readLatest returns the directory name LATEST holds.
func readLatest(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, latestName))
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(b))
	if _, ok := parseStepName(name); !ok {
		return "", errors.Errorf("checkpoint: %s holds %q, not a checkpoint's name (corrupted)", filepath.Join(root, latestName), name)
	}
	return name, nil
}
