package runspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/schedule"
)

// Spec is a run: the zoo recipe Model names, with what the user changed.
// A field at its zero value (nil for a pointer) keeps the recipe's or the
// method's; a pointer is set where 0 or false is a value of its own. Its
// JSON form, with the keys in the tags (the setting names), is the one
// serialisation of a run's settings: a field left alone is absent.
type Spec struct {
	// Model is the zoo model whose recipe the run starts from.
	Model string `json:"model"`
	// Data is where the data is read from ("embedded", "auto" or a
	// directory): where, not what, so it may differ between hosts.
	Data string `json:"data,omitempty"`
	// Method is a train.Method's name; Schedule a schedule's, in place of
	// the method's.
	Method   string `json:"method,omitempty"`
	Schedule string `json:"schedule,omitempty"`
	// Stages is "fine" (one stage per layer) or a number; Cut the op
	// positions to cut before, as ParseCut reads them, which must make
	// Stages stages if both are given.
	Stages string `json:"stages,omitempty"`
	Cut    string `json:"cut,omitempty"`
	// Placement is how the stages map to the processes that host several
	// each (schedule.Placement's names: contiguous, round-robin, v,
	// balanced); "" follows the schedule (Placed).
	Placement string `json:"placement,omitempty"`
	// Microbatch (rows), Microbatches (N), Epochs and LR replace the
	// recipe's when positive.
	Microbatch   int     `json:"microbatch,omitempty"`
	Microbatches int     `json:"microbatches,omitempty"`
	Epochs       int     `json:"epochs,omitempty"`
	LR           float64 `json:"lr,omitempty"`
	// Momentum is β, 0 for plain SGD.
	Momentum *float64 `json:"momentum,omitempty"`
	// Cosine anneals the rate; StepDecay divides it by 10 at half and
	// three quarters of the run instead.
	Cosine    *bool `json:"cosine,omitempty"`
	StepDecay bool  `json:"step_decay,omitempty"`
	// T1 is T1's rescheduling length K in asynchronous steps, T2 T2's γ,
	// Warmup the synchronous warm-up in steps (0: off, each).
	T1     *int     `json:"t1,omitempty"`
	T2     *float64 `json:"t2,omitempty"`
	Warmup *int     `json:"warmup,omitempty"`
	// Stash keeps the forward's activations for the backward.
	Stash *bool `json:"stash,omitempty"`
	// Kernels is the kernel mode of the float32 matrix products, "exact"
	// (gonum's bits, the default) or "fast" (graphsplit.Kernels).
	Kernels string `json:"kernels,omitempty"`
	Seed    *int64 `json:"seed,omitempty"`
	// Limit and TestLimit keep the first training and test examples (0:
	// all).
	Limit     int `json:"limit,omitempty"`
	TestLimit int `json:"test_limit,omitempty"`
}

// Check refuses a value out of range, and a cut that contradicts Stages,
// with an *Error naming the setting: the checks that need neither the
// recipe nor the data (train.ConfigFor makes the others).
func (s Spec) Check() error {
	for _, f := range []struct {
		name string
		v    float64
		zero string
	}{{"microbatch", float64(s.Microbatch), "the recipe's"}, {"microbatches", float64(s.Microbatches), "the recipe's"},
		{"epochs", float64(s.Epochs), "the recipe's"}, {"lr", s.LR, "the recipe's"},
		{"limit", float64(s.Limit), "all"}, {"test_limit", float64(s.TestLimit), "all"}} {
		if !(f.v >= 0) { // NaN too
			return errorf(f.name, format(f.v), "must be positive (or 0 for "+f.zero+")")
		}
	}
	switch {
	case s.Momentum != nil && !(*s.Momentum >= 0 && *s.Momentum < 1):
		return errorf("momentum", format(*s.Momentum), "must be in [0, 1) (0: plain SGD)")
	case s.Warmup != nil && *s.Warmup < 0:
		return errorf("warmup", strconv.Itoa(*s.Warmup), "a number of steps (0: none)")
	case s.T1 != nil && *s.T1 < 0:
		return errorf("t1", strconv.Itoa(*s.T1), "a number of steps (0: off)")
	case s.T2 != nil && !(*s.T2 >= 0 && *s.T2 < 1):
		return errorf("t2", format(*s.T2), "must be in [0, 1) (0: off)")
	case s.Kernels != "" && s.Kernels != "exact" && s.Kernels != "fast":
		return errorf("kernels", strconv.Quote(s.Kernels), "exact or fast")
	}
	sch, err := s.ScheduleNamed()
	if err != nil {
		return err
	}
	if _, err := Placed(s.Placement, sch); err != nil {
		return err
	}
	p, err := s.StageCount()
	if err != nil {
		return err
	}
	cut, err := ParseCut(s.Cut)
	if err != nil {
		return err
	}
	if cut != nil && p > 0 && p != len(cut)+1 {
		return errorf("stages", s.Stages+" and {cut} "+s.Cut, fmt.Sprintf("the cut makes %d stages; give one of the two", len(cut)+1))
	}
	return nil
}

// StageCount is Stages as a number (0: fine, or not given).
func (s Spec) StageCount() (int, error) {
	if s.Stages == "" || s.Stages == "fine" {
		return 0, nil
	}
	p, err := strconv.Atoi(s.Stages)
	if err != nil || p < 1 {
		return 0, errorf("stages", strconv.Quote(s.Stages), "a positive number or fine")
	}
	return p, nil
}

// ScheduleNamed is the schedule Schedule names (zero: none named), or an
// *Error listing the names. A schedule whose workers any placement may
// take (schedule.Schedule.PlacedBy: PipeMare-V) comes placed by
// Placement, when it names one such.
func (s Spec) ScheduleNamed() (schedule.Schedule, error) {
	if s.Schedule == "" {
		return schedule.Schedule{}, nil
	}
	sch, err := ScheduleNamed(s.Schedule)
	if err != nil || s.Placement == "" {
		return sch, err
	}
	if pl, ok := schedule.PlacementNamed(s.Placement); ok {
		if placed, ok := sch.PlacedBy(pl); ok {
			return placed, nil
		}
	}
	return sch, nil
}

// ScheduleNamed is the schedule of that name, or an *Error of the
// schedule setting that lists the names.
func ScheduleNamed(name string) (schedule.Schedule, error) {
	sch, ok := schedule.ByName(name)
	if !ok {
		return sch, errorf("schedule", strconv.Quote(name), "unknown schedule (one of "+strings.Join(schedule.Names(), ", ")+")")
	}
	return sch, nil
}

// Placed is the placement named name (schedule.PlacementNamed) for a run
// of schedule sch (as Spec.ScheduleNamed gives it: PipeMare-V already
// placed by name): "" is sch's own when its workers host several stages
// each (interleaved: round-robin, zb-v: v, pipemare-v: contiguous unless
// placed), else balanced (contiguous blocks split by the stages'
// estimated costs; where the stages run never changes what a schedule of
// one stage per worker computes). It refuses, with an *Error of the
// placement setting, a name it does not know and a placement other than
// the one such a schedule places its stages by (a process would then host
// parts of its workers).
func Placed(name string, sch schedule.Schedule) (schedule.Placement, error) {
	own := schedule.Balanced
	if sch.Virtual() > 1 {
		own = sch.Place
	}
	if name == "" {
		return own, nil
	}
	pl, ok := schedule.PlacementNamed(name)
	if !ok {
		var names []string
		for _, p := range schedule.Placements() {
			names = append(names, p.String())
		}
		return pl, errorf("placement", strconv.Quote(name), "one of "+strings.Join(names, ", ")+" (default: the schedule's)")
	}
	if sch.Virtual() > 1 && pl != own {
		if _, ok := sch.PlacedBy(schedule.Contiguous); ok {
			return pl, errorf("placement", name, fmt.Sprintf("schedule %s places its stages on its workers by the schedule, not by their costs: give {placement} %v, %v or %v", sch.Name, schedule.Contiguous, schedule.RoundRobin, schedule.VShape))
		}
		return pl, errorf("placement", name, fmt.Sprintf("schedule %s places its stages %v: give {placement} %v, or leave it to the schedule", sch.Name, own, own))
	}
	return pl, nil
}

// JSON is the spec's JSON form, compact, keys in the order of the fields.
func (s Spec) JSON() []byte {
	b, _ := json.Marshal(s) // plain fields: cannot fail
	return b
}

// Parse reads a spec's JSON form, refusing an unknown key (a spec written
// by another version, or mistyped) and a value Check refuses.
func Parse(b []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, errorf("spec", "", "not a run specification: "+err.Error())
	}
	if s.Model == "" {
		return s, errorf("spec", "", "names no model")
	}
	return s, s.Check()
}

// Hash names the spec: the SHA-256 of its JSON form, in hex. Two specs
// have the same hash exactly when Diff finds nothing.
func (s Spec) Hash() string {
	h := sha256.Sum256(s.JSON())
	return hex.EncodeToString(h[:])
}

// format writes a number as a flag would take it.
func format(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
