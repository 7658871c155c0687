package rundir

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
)

// Dir is the -out directory of a command and the files it writes there.
type Dir struct {
	Path  string
	Files []string
}

// Prepare creates the directory and checks that every file can be written
// there, before anything trains: a run is never lost to an output path
// that cannot be written. It leaves existing files as they are and removes
// the empty files it created to check.
func (o Dir) Prepare() error {
	if err := os.MkdirAll(o.Path, 0o755); err != nil {
		return &runspec.Error{Setting: "out", Value: o.Path, Err: err}
	}
	for _, name := range o.Files {
		path := filepath.Join(o.Path, name)
		_, statErr := os.Stat(path)
		existed := statErr == nil
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, checkpoint.FileMode)
		if err != nil {
			return &runspec.Error{Setting: "out", Value: o.Path, Reason: "cannot write " + name, Err: err}
		}
		if err := f.Close(); err != nil {
			return &runspec.Error{Setting: "out", Value: o.Path, Reason: "cannot write " + name, Err: err}
		}
		if !existed {
			if err := os.Remove(path); err != nil {
				return &runspec.Error{Setting: "out", Value: o.Path, Err: err}
			}
		}
	}
	return nil
}

// WriteJSON writes v, indented, to the file name in the directory.
func (o Dir) WriteJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "%s", name)
	}
	return o.Write(name, func(f *os.File) error { _, err := f.Write(append(b, '\n')); return err })
}

// WriteSettings writes the run's settings to SettingsFile, atomically
// (checkpoint.WriteFile): a crash leaves the old ones or the new.
func (o Dir) WriteSettings(s Settings) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "%s", SettingsFile)
	}
	return checkpoint.WriteFile(filepath.Join(o.Path, SettingsFile), append(b, '\n'))
}

// WriteTrace writes the Chrome trace of a run's last k minibatches (k = 0:
// all) to the file name (asyncvm.WriteTrace).
func (o Dir) WriteTrace(name string, r *train.Result, k int) error {
	return o.Write(name, func(f *os.File) error {
		return asyncvm.WriteTrace(f, r.Events, asyncvm.TraceLastMinibatches(k, r.Report.Microbatches))
	})
}

// Write creates the file name in the directory and fills it with fill; any
// failure, closing included, is an error naming the file.
func (o Dir) Write(name string, fill func(*os.File) error) error {
	path := filepath.Join(o.Path, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, checkpoint.FileMode)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return errors.Wrapf(err, "writing %s", path)
	}
	if err := f.Close(); err != nil {
		return errors.Wrapf(err, "writing %s", path)
	}
	return nil
}
