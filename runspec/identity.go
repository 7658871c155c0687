package runspec

import (
	"github.com/pipemare/pipemare/transport"
)

// unset is a setting's value in Settings when the spec leaves it to the
// recipe or the method.
const unset = "default"

// notAtStage are the settings that do not reach a stage's computation, or
// reach it through the plan: where the data is read from, the cut (the
// plan's fingerprint covers it) and the test examples (the driver's).
var notAtStage = map[string]bool{"data": true, "stages": true, "cut": true, "test_limit": true}

// Settings are the spec's settings that reach a stage, as name=value in
// the order of Spec's fields, every one present (as the spec holds it: 0
// or "" for a number or name left to the recipe or the method, "default"
// for a pointer left so): its canonical form, which peers compare.
func (s Spec) Settings() []transport.Setting {
	var out []transport.Setting
	for _, kv := range fields(s) {
		if !notAtStage[kv.Name] {
			out = append(out, transport.Setting(kv))
		}
	}
	return out
}

// Identity is what every peer of the run compares at its handshake
// (transport.Identity.Check): the plan's fingerprint and the spec's
// Settings. Every transport's setup builds its identity here.
func (s Spec) Identity(fingerprint string) transport.Identity {
	return transport.Identity{Plan: fingerprint, Settings: s.Settings()}
}
