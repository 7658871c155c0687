package main

import (
	"regexp"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/runspec"
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
// *runspec.DiffError within it worded by the flags (their Words), and a
// peer refused for another setting (transport.MismatchError, here or
// passed on as text by the peer) named by its flag. errors.Is and As see
// err.
func inFlags(err error) error {
	if err == nil {
		return nil
	}
	msg := flagText(err)
	msg = anotherSetting.ReplaceAllStringFunc(msg, func(m string) string { // a peer's refusal, perhaps passed on as text
		setting := anotherSetting.FindStringSubmatch(m)[1]
		return "runs with another " + flagOf(setting) + ":"
	})
	if msg == err.Error() {
		return err
	}
	return worded{msg, err}
}

// flagText is err's message with every runspec.Worded error within it,
// through wrapping and errors.Join, worded by the flags.
func flagText(err error) string {
	if w, ok := err.(runspec.Worded); ok {
		return w.Words(flagOf)
	}
	msg := err.Error()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			msg = strings.Replace(msg, e.Error(), flagText(e), 1)
		}
		return msg
	}
	if inner := errors.Unwrap(err); inner != nil {
		return strings.Replace(msg, inner.Error(), flagText(inner), 1)
	}
	return msg
}

// anotherSetting is how a transport.MismatchError names the setting a
// peer differs in.
var anotherSetting = regexp.MustCompile(`runs with another ([a-z0-9_]+):`)

// worded is an error with another message (inFlags).
type worded struct {
	msg string
	err error
}

func (w worded) Error() string { return w.msg }
func (w worded) Unwrap() error { return w.err }
