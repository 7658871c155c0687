package runspec

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a setting — of the run, or of how a process runs it — whose
// value cannot be used: which setting, the value as given, why, and the
// error beneath, if any ("setting value: reason: error beneath"). Reason
// may name other settings as {name} (say "give {epochs} 3 or more"), and
// so may Value for an error of two settings together ("3 and {cut} 6"). Error writes every setting as its bare name
// ("epochs 1: …"); a command words them as its flags with Words. Setting
// names are snake_case: the Spec's JSON keys, and for the settings of a
// process the like (out, resume, stage_addrs, connect_timeout, …).
type Error struct {
	Setting, Value string
	Reason         string
	Err            error
}

func (e *Error) Error() string { return e.Words(bare) }

func (e *Error) Unwrap() error { return e.Err }

// Words is the error's message with each setting, its own and those
// Reason names, written as word writes it: "{lr} 0.2: …" becomes "-lr
// 0.2: …" for a command whose flags are -name. An error beneath that has
// Words too is worded alike.
func (e *Error) Words(word func(setting string) string) string {
	head := word(e.Setting)
	if e.Value != "" {
		head += " " + wordSettings(e.Value, word)
	}
	parts := []string{head}
	if e.Reason != "" {
		parts = append(parts, wordSettings(e.Reason, word))
	}
	if e.Err != nil {
		parts = append(parts, wordErr(e.Err, word))
	}
	return strings.Join(parts, ": ")
}

// Worded is an error whose message names settings: *Error and
// *DiffError.
type Worded interface {
	error
	Words(word func(setting string) string) string
}

// wordErr is err's message, worded by word if it is Worded.
func wordErr(err error, word func(string) string) string {
	if w, ok := err.(Worded); ok {
		return w.Words(word)
	}
	return err.Error()
}

// bare writes a setting as its name.
func bare(setting string) string { return setting }

// wordSettings replaces each {name} of s with word(name).
func wordSettings(s string, word func(string) string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			break
		}
		b.WriteString(s[:open])
		b.WriteString(word(s[open+1 : open+end]))
		s = s[open+end+1:]
	}
	b.WriteString(s)
	return b.String()
}

// Words writes s, which names settings as {name}, with each setting as
// word writes it: for a message that is not an error.
func Words(s string, word func(setting string) string) string { return wordSettings(s, word) }

// errorf is an *Error of setting with value and reason.
func errorf(setting, value, reason string) *Error {
	return &Error{Setting: setting, Value: value, Reason: reason}
}

// Errorf is an error whose message, formatted as fmt.Errorf does (%w
// wraps an error errors.Is and As then see), names settings as {name}: its
// Error writes them as bare names, its Words as a command words them
// (Worded).
func Errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &textError{text: err.Error(), err: errors.Unwrap(err)}
}

// textError is Errorf's error.
type textError struct {
	text string
	err  error
}

func (e *textError) Unwrap() error { return e.err }

func (e *textError) Error() string                                 { return wordSettings(e.text, bare) }
func (e *textError) Words(word func(setting string) string) string { return wordSettings(e.text, word) }
