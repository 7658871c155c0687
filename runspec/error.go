package runspec

import "strings"

// Error is a setting whose value cannot run: which setting, the value as
// given, and why. Reason may name other settings as {name} (say
// "give {epochs} 3 or more"); Error renders them as the bare names, Words
// as a command words them (pipemare: its flags).
type Error struct {
	Setting, Value string
	Reason         string
}

func (e *Error) Error() string { return e.Words(func(s string) string { return s }) }

// Words is the error's message with each setting, its own and those
// Reason names, written as word writes it: "{lr} 0.2: …" becomes "-lr
// 0.2: …" for a command whose flags are -name.
func (e *Error) Words(word func(setting string) string) string {
	head := word(e.Setting)
	if e.Value != "" {
		head += " " + e.Value
	}
	return head + ": " + wordSettings(e.Reason, word)
}

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

// Errorf is an *Error of setting with value, its reason formatted.
func errorf(setting, value, reason string) *Error {
	return &Error{Setting: setting, Value: value, Reason: reason}
}
