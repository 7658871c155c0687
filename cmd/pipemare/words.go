package main

import (
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
)

// settingFlags are the flags of the settings whose flag is not the
// setting's name with "-" for "_": the one table from the libraries'
// setting names (runspec.Spec's JSON keys, errors' Setting fields) to the
// command line's words.
var settingFlags = map[string]string{
	"microbatch_rows": "-microbatch", "t1_steps": "-t1", "t2_gamma": "-t2", "warmup_steps": "-warmup",
	"activations": "-stash", "solver": "-momentum", "training_examples": "-limit", "test_examples": "-test-limit",
}

// flagOf is the flag that gives a setting.
func flagOf(setting string) string {
	if f, ok := settingFlags[setting]; ok {
		return f
	}
	return "-" + strings.ReplaceAll(setting, "_", "-")
}

// inFlags is err in the command line's words: a *runspec.Error or
// *runspec.DiffError within it worded by the flags (their Words), and a peer refused for
// another setting (transport.MismatchError) named by its flag. errors.Is
// and As see err.
func inFlags(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var se *runspec.Error
	if errors.As(err, &se) {
		msg = strings.Replace(msg, se.Error(), se.Words(flagOf), 1)
	}
	var de *runspec.DiffError
	if errors.As(err, &de) {
		msg = strings.Replace(msg, de.Error(), de.Words(flagOf), 1)
	}
	var me *transport.MismatchError
	if errors.As(err, &me) && me.Setting != transport.PlanSetting {
		msg = strings.Replace(msg, "with another "+me.Setting+":", "with another "+flagOf(me.Setting)+":", 1)
	}
	if msg == err.Error() {
		return err
	}
	return worded{msg, err}
}

// worded is an error with another message (inFlags).
type worded struct {
	msg string
	err error
}

func (w worded) Error() string { return w.msg }
func (w worded) Unwrap() error { return w.err }
