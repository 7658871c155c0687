package rundir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/runspec"
)

// The files of a run in its output directory besides its results.
const (
	// CheckpointsDir holds the run's checkpoints (package checkpoint's
	// layout: LATEST and step-… directories).
	CheckpointsDir = "checkpoints"
	// SettingsFile holds the run's settings, written before it trains:
	// -resume compares them with its own.
	SettingsFile = "settings.json"
	// ModelFile is the trained model (checkpoint.SaveModel).
	ModelFile = "model" + checkpoint.ModelExt
)

// ResumeAuto is the -resume of a job that a launcher restarts whole (a
// Kubernetes JobSet): continue -out's run if it has a checkpoint, else
// start it there.
const ResumeAuto = "auto"

// ResumeTarget splits -resume DIR into the run's output directory and the
// checkpoint to continue from: DIR's latest (DIR/checkpoints), or, when
// DIR is one checkpoint of a run (OUT/checkpoints/step-…), that one; for
// ResumeAuto, out's latest.
func ResumeTarget(dir, out string) (string, string) {
	if dir == ResumeAuto {
		dir = out
	}
	dir = filepath.Clean(dir)
	if strings.HasPrefix(filepath.Base(dir), "step-") && filepath.Base(filepath.Dir(dir)) == CheckpointsDir {
		return filepath.Dir(filepath.Dir(dir)), dir
	}
	return dir, filepath.Join(dir, CheckpointsDir)
}

// Start is how a run starts in its output directory: afresh (-out),
// from a checkpoint (-resume DIR), or from one if there is one (-resume
// auto).
type Start int

const (
	Fresh       Start = iota // -out: a new run
	Resume                   // -resume DIR: from a checkpoint DIR holds
	ResumeIfAny              // -resume auto: from one if there is one
)

// ErrFinished is StartPoint's answer to -resume DIR or -resume auto for a
// run that finished: there is nothing to train (a command says so and
// exits 0).
var ErrFinished = errors.New("the run is complete")

// finishedError is ErrFinished for the run in out, whose weights have
// hash sha.
type finishedError struct{ out, sha string }

func (e finishedError) Error() string { return e.Words(func(s string) string { return s }) }

// Words is the message with the out setting as word writes it
// (runspec.Worded).
func (e finishedError) Words(word func(string) string) string {
	return fmt.Sprintf("the run in %s is complete (report.json: weights_sha256 %s; %s written): nothing to resume; a new run needs another %s", e.out, e.sha, ModelFile, word("out"))
}

func (e finishedError) Is(target error) bool { return target == ErrFinished }

// finished reports whether the run in out finished, and the hash of the
// weights it trained: its report.json records weights_sha256 (set only
// when every epoch ran and the pipeline flushed) without "interrupted",
// and the trained model it writes after the report is there.
func finished(out string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		return "", false
	}
	var r struct {
		Result *struct {
			WeightsSHA256 string `json:"weights_sha256"`
			Interrupted   bool   `json:"interrupted"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &r) != nil || r.Result == nil || r.Result.WeightsSHA256 == "" || r.Result.Interrupted {
		return "", false
	}
	if _, err := os.Stat(filepath.Join(out, ModelFile)); err != nil {
		return "", false
	}
	return r.Result.WeightsSHA256, true
}

// StartPoint checks the output directory out against the run about to
// start there with settings now, and returns the checkpoint it continues
// from (nil: it starts afresh). Resuming a run that finished (-resume
// DIR or auto, not a named checkpoint) is ErrFinished, wrapped in a
// message that names the run's weights. Resuming, out's settings must be now's
// (the error names the flags that differ), and from is a checkpoint
// directory or a root whose LATEST to take; a root with no checkpoint is
// an error naming it (a mistyped -resume), except for ResumeIfAny, where
// it is a fresh start (a restarted job that never reached its first
// checkpoint). Afresh, out must not hold checkpoints: they would be
// replaced. It creates nothing.
func StartPoint(out, from string, how Start, now Settings) (*checkpoint.Checkpoint, error) {
	if how == Resume {
		if _, err := os.Stat(out); err != nil {
			return nil, &runspec.Error{Setting: "resume", Value: out, Reason: fmt.Sprintf("%v (a new run is {out} %s)", err, out)}
		}
	}
	if how == Fresh {
		root := filepath.Join(out, CheckpointsDir)
		if st, err := os.Stat(root); err != nil || !st.IsDir() { // nothing to replace (an -out that cannot be written is prepare's to report)
			return nil, nil
		}
		if c, err := checkpoint.Latest(root); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
			step := "an unusable one"
			if err == nil {
				step = fmt.Sprintf("step %d", c.Manifest.Step)
			}
			return nil, &runspec.Error{Setting: "out", Value: out, Reason: fmt.Sprintf("holds the checkpoints of an earlier run (%s, latest %s): continue it with {resume} %s, or give another {out}", root, step, out)}
		}
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(out, SettingsFile))
	switch {
	case err == nil:
		var then Settings
		if err := json.Unmarshal(b, &then); err != nil {
			return nil, &runspec.Error{Setting: "resume", Value: out, Reason: filepath.Join(out, SettingsFile), Err: err}
		}
		then.Spec, now.Spec = nil, nil // the resolved settings decide; a settings.json may predate specs
		if d := runspec.Diff(then, now); d != nil {
			return nil, &runspec.DiffError{Before: "{resume} " + out + ": the run was started with other settings: ", Differences: d, After: "; resume with the settings it was started with"}
		}
	case !os.IsNotExist(err):
		return nil, &runspec.Error{Setting: "resume", Value: out, Err: err}
	}
	if sha, ok := finished(out); ok && filepath.Base(from) == CheckpointsDir {
		return nil, finishedError{out: out, sha: sha}
	}
	if filepath.Base(from) != CheckpointsDir { // one checkpoint, named
		c, err := checkpoint.Open(from)
		if err != nil {
			return nil, &runspec.Error{Setting: "resume", Value: from, Err: err}
		}
		return c, nil
	}
	c, err := checkpoint.Latest(from)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) { // killed before LATEST was first written?
		if c = newerComplete(from, nil); c != nil {
			return c, nil
		}
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint) && how == ResumeIfAny:
		return nil, nil
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		return nil, &runspec.Error{Setting: "resume", Value: out, Reason: fmt.Sprintf("no checkpoint in %s to continue from (a new run is {out} %s; {resume} %s continues one if there is one, else starts it)", from, out, ResumeAuto)}
	case err != nil:
		return nil, unusableLatest(out, from, err)
	}
	return newerComplete(from, c), nil
}

// newerComplete is the newest complete checkpoint under root newer than
// latest, the one LATEST names (nil: there is no LATEST yet), if one
// verifies: a run killed after it wrote a checkpoint's manifest but before
// it moved LATEST loses nothing. It is a state of this very run (its
// settings are these, and a run is deterministic), and it was never
// committed, so one that does not verify is passed over for latest.
func newerComplete(root string, latest *checkpoint.Checkpoint) *checkpoint.Checkpoint {
	entries, err := checkpoint.List(root)
	if err != nil {
		return latest
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if latest != nil && e.Step <= latest.Manifest.Step {
			break
		}
		if e.Complete {
			if c, err := checkpoint.Open(e.Dir); err == nil {
				return c
			}
		}
	}
	return latest
}

// unusableLatest is the error of a root whose latest checkpoint does not
// verify: what is wrong with it, and the previous complete checkpoint to
// continue from instead.
func unusableLatest(out, root string, err error) error {
	b, rerr := os.ReadFile(filepath.Join(root, "LATEST"))
	if rerr != nil {
		return &runspec.Error{Setting: "resume", Value: out, Err: err}
	}
	latest := filepath.Join(root, strings.TrimSpace(string(b)))
	if _, oerr := checkpoint.Open(latest); oerr != nil {
		err = oerr
	}
	msg := fmt.Sprintf("its latest checkpoint %s is unusable: %v", latest, err)
	entries, lerr := checkpoint.List(root)
	if lerr != nil {
		return &runspec.Error{Setting: "resume", Value: out, Reason: msg}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Complete && e.Dir < latest {
			if _, err := checkpoint.Open(e.Dir); err == nil {
				return &runspec.Error{Setting: "resume", Value: out, Reason: fmt.Sprintf("%s; the previous complete checkpoint is %s: continue from it with {resume} %s", msg, e.Dir, e.Dir)}
			}
		}
	}
	return &runspec.Error{Setting: "resume", Value: out, Reason: msg + "; there is no earlier complete checkpoint: start afresh in another {out}"}
}

// RecordedCut is the cut in the settings of the run in dir (nil: none): a
// resumed run keeps the cut it measured.
func RecordedCut(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, SettingsFile))
	if err != nil {
		return nil
	}
	var s Settings
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	return s.Cut
}
