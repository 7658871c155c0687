package transport

import (
	"fmt"
	"strings"
)

// Identity is what every peer of one run must share, whatever carries its
// messages: how the model was cut and the run's settings that reach a
// stage. A network transport exchanges identities when two peers first
// meet and refuses a peer whose identity differs (Check).
type Identity struct {
	// Plan identifies how the model was cut (the plan's fingerprint).
	// Opaque here.
	Plan string
	// Settings are the run's settings that reach a stage, as name=value
	// pairs in one fixed order: the run specification's canonical form.
	// Names and values are opaque here.
	Settings []Setting
}

// Setting is one named run setting and its value, both as text.
type Setting struct{ Name, Value string }

// MismatchError is Check's error: a peer that differs in the plan or in a
// setting. Setting is "plan" for the plan's fingerprint.
type MismatchError struct {
	Peer         string // the other peer, as the transport names it ("stage 1 at 10.0.0.2:7001")
	Setting      string
	Mine, Theirs string
}

func (e *MismatchError) Error() string {
	if e.Setting == PlanSetting {
		return fmt.Sprintf("%s cut the model differently: its plan fingerprint is %s, this peer's %s (every process must build the same model and split it the same way)",
			e.Peer, abbreviate(e.Theirs), abbreviate(e.Mine))
	}
	return fmt.Sprintf("%s runs with another %s: %s there, %s here (every process of a run must be started with the same run specification)",
		e.Peer, e.Setting, quote(e.Theirs), quote(e.Mine))
}

// PlanSetting is MismatchError.Setting for a different plan fingerprint.
const PlanSetting = "plan"

// Check compares the identity a peer announced (theirs) with this one and
// returns nil if they agree, else a *MismatchError naming the first
// difference: the plan, then the settings in this identity's order, then a
// setting only the peer has. who names the peer in the error.
func (id Identity) Check(theirs Identity, who string) error {
	if id.Plan != theirs.Plan {
		return &MismatchError{Peer: who, Setting: PlanSetting, Mine: id.Plan, Theirs: theirs.Plan}
	}
	their := make(map[string]string, len(theirs.Settings))
	for _, s := range theirs.Settings {
		their[s.Name] = s.Value
	}
	for _, s := range id.Settings {
		v, ok := their[s.Name]
		if !ok {
			return &MismatchError{Peer: who, Setting: s.Name, Mine: s.Value, Theirs: "(not set)"}
		}
		if v != s.Value {
			return &MismatchError{Peer: who, Setting: s.Name, Mine: s.Value, Theirs: v}
		}
		delete(their, s.Name)
	}
	for _, s := range theirs.Settings {
		if _, extra := their[s.Name]; extra {
			return &MismatchError{Peer: who, Setting: s.Name, Mine: "(not set)", Theirs: s.Value}
		}
	}
	return nil
}

// abbreviate shortens a long fingerprint for a message.
func abbreviate(fp string) string {
	if fp == "" {
		return `""`
	}
	if len(fp) > 12 {
		return fp[:12] + "…"
	}
	return fp
}

func quote(v string) string {
	if v == "" || strings.ContainsAny(v, " \t") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
