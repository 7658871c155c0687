package runspec

import (
	"encoding/json"
	"slices"

	"github.com/pipemare/pipemare/transport"
)

// unset is a setting's value in Settings when the spec leaves it to the
// recipe or the method.
const unset = "default"

// notAtStage are the settings that do not reach a stage's computation, or
// reach it through the plan: where the data is read from, the cut (the
// plan's fingerprint covers it) and the test examples (the driver's).
var notAtStage = map[string]bool{"data": true, "stages": true, "cut": true, "test_limit": true}

// derived are the settings whose resolved value follows from others, in
// the order they follow: the cosine from the step decay, which replaces
// it; the warm-up from the run's length in steps; T1 from that and the
// warm-up. Settings lists them last, so that a refusal names the setting
// a peer was given, not its consequence.
var derived = []string{"cosine", "warmup", "t1"}

// Settings are the spec's settings that reach a stage, as name=value in
// the order of Spec's fields, derived ones last, every one present
// ("default" for one the spec leaves to the recipe or the method, which
// its JSON form leaves out): its canonical form, which peers compare.
func (s Spec) Settings() []transport.Setting {
	all := s.named(func(name string, given bool) bool { return !notAtStage[name] })
	out := slices.DeleteFunc(slices.Clone(all), func(kv transport.Setting) bool { return slices.Contains(derived, kv.Name) })
	for _, name := range derived {
		out = append(out, all[slices.IndexFunc(all, func(kv transport.Setting) bool { return kv.Name == name })])
	}
	return out
}

// Identity is what every peer of the run compares at its handshake
// (transport.Identity.Check): the plan's fingerprint and the spec's
// Settings. Every transport's setup builds its identity here, from the
// resolved spec (train.Resolved), whose every setting has the value that
// reaches a stage: a peer given a value equal to the recipe's runs the
// same setting as one that left it alone, and is accepted.
func (s Spec) Identity(fingerprint string) transport.Identity {
	return transport.Identity{Plan: fingerprint, Settings: s.Settings()}
}

// Given are the settings the spec gives — those its JSON form holds — as
// name=value in the order of Spec's fields: what a command line writes to
// start the same run.
func (s Spec) Given() []transport.Setting {
	return s.named(func(name string, given bool) bool { return given })
}

// named are the spec's fields that keep says to keep (by name, and
// whether the spec gives it), as name=value in field order, a field the
// spec leaves out "default".
func (s Spec) named(keep func(name string, given bool) bool) []transport.Setting {
	b := s.JSON()
	var given map[string]json.RawMessage
	_ = json.Unmarshal(b, &given)
	var out []transport.Setting
	for _, name := range keys(s, b) {
		if v, ok := given[name]; keep(name, ok) {
			out = append(out, transport.Setting{Name: name, Value: text(v, ok)})
		}
	}
	return out
}
