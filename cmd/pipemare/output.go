package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/train"
)

// outputs is the -out directory of a command and the files it writes there.
type outputs struct {
	dir   string
	files []string
}

// plotFiles are the plots every training command writes.
var plotFiles = experiment.PlotFiles

// prepare creates the directory and checks that every file can be written
// there, before anything trains: a run is never lost to an output path
// that cannot be written. It leaves existing files as they are and removes
// the empty files it created to check.
func (o outputs) prepare() error {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return fmt.Errorf("-out %s: %w", o.dir, err)
	}
	for _, name := range o.files {
		path := filepath.Join(o.dir, name)
		_, statErr := os.Stat(path)
		existed := statErr == nil
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("-out %s: cannot write %s: %w", o.dir, name, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("-out %s: cannot write %s: %w", o.dir, name, err)
		}
		if !existed {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("-out %s: %w", o.dir, err)
			}
		}
	}
	return nil
}

// writeJSON writes v, indented, to the file name in the directory.
func (o outputs) writeJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return o.write(name, func(f *os.File) error { _, err := f.Write(append(b, '\n')); return err })
}

// writeSettings writes the run's settings to settingsFile, atomically
// (checkpoint.WriteFile): a crash leaves the old ones or the new.
func (o outputs) writeSettings(s settings) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", settingsFile, err)
	}
	return checkpoint.WriteFile(filepath.Join(o.dir, settingsFile), append(b, '\n'))
}

// writeTrace writes the Chrome trace of a run's last k minibatches (k = 0:
// all) to the file name (asyncvm.WriteTrace).
func (o outputs) writeTrace(name string, r *train.Result, k int) error {
	return o.write(name, func(f *os.File) error {
		return asyncvm.WriteTrace(f, r.Events, asyncvm.TraceLastMinibatches(k, r.Report.Microbatches))
	})
}

// write creates the file name in the directory and fills it with fill; any
// failure, closing included, is an error naming the file.
func (o outputs) write(name string, fill func(*os.File) error) error {
	path := filepath.Join(o.dir, name)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
