package experiment

import (
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/train"
	"github.com/pkg/errors"
)

// Variant is a train.Method with some of its parameters given: one row of a
// sweep. Its text form (String, ParseVariant) is the method's name, then
// the parameters given in parentheses, in a fixed order:
//
//	spike(warmup=0.05,t1=0.5,t2=0.9,lr=0.1,momentum=0.9,decay=step)
//
// A parameter left out keeps the recipe's or the method's value.
type Variant struct {
	Method train.Method
	// Warmup is the synchronous warm-up (T3) as a fraction of the run's
	// steps, in [0, 1), instead of the recipe's epochs. A method without a
	// warm-up (naive) gets one.
	Warmup *float64
	// T1 is T1's phase K as a fraction of the run's asynchronous steps, in
	// [0, 1] (0: T1 off) instead of the method's (all of them).
	T1 *float64
	// T2 is T2's γ, in [0, 1) (0: off).
	T2 *float64
	// LR is the base learning rate, Momentum the solver's β in [0, 1) (0:
	// plain SGD).
	LR, Momentum *float64
	// Decay is the base schedule: "cosine" (to LR/100), "step" (÷10 at
	// half and three quarters of the run) or "constant"; "": the recipe's.
	Decay string
}

// Decays are the base schedules a Variant can name.
var Decays = []string{"cosine", "step", "constant"}

// variantKeys are the parameters in their text order.
var variantKeys = []string{"warmup", "t1", "t2", "lr", "momentum", "decay"}

// floats are the variant's numeric parameters by key.
func (v *Variant) floats() map[string]**float64 {
	return map[string]**float64{"warmup": &v.Warmup, "t1": &v.T1, "t2": &v.T2, "lr": &v.LR, "momentum": &v.Momentum}
}

// String is the variant's text form.
func (v Variant) String() string {
	var params []string
	for _, k := range variantKeys {
		if k == "decay" {
			if v.Decay != "" {
				params = append(params, "decay="+v.Decay)
			}
			continue
		}
		if p := *v.floats()[k]; p != nil {
			params = append(params, k+"="+strconv.FormatFloat(*p, 'g', -1, 64))
		}
	}
	if len(params) == 0 {
		return string(v.Method)
	}
	return string(v.Method) + "(" + strings.Join(params, ",") + ")"
}

// key is the variant in a file name: "spike_warmup=0.05_t1=0.5".
func (v Variant) key() string {
	return strings.NewReplacer("(", "_", ")", "", ",", "_").Replace(v.String())
}

// ParseVariant reads a variant's text form, refusing an unknown method or
// parameter, a parameter given twice and a value out of its range.
func ParseVariant(s string) (Variant, error) {
	name, params, hasParams := strings.Cut(strings.TrimSpace(s), "(")
	m, err := train.ParseMethod(strings.TrimSpace(name))
	if err != nil {
		return Variant{}, err
	}
	v := Variant{Method: m}
	if !hasParams {
		return v, nil
	}
	params, ok := strings.CutSuffix(strings.TrimSpace(params), ")")
	if !ok || strings.ContainsAny(params, "()") {
		return Variant{}, errors.Errorf("%q: parameters are name(key=value,…), with one closing parenthesis at the end", s)
	}
	for _, p := range strings.Split(params, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		if err := v.set(k, strings.TrimSpace(val)); err != nil {
			return Variant{}, errors.Wrapf(err, "%q", s)
		}
	}
	return v, nil
}

// set sets the parameter k from its text.
func (v *Variant) set(k, val string) error {
	if k == "decay" {
		if v.Decay != "" {
			return errors.New("decay given twice")
		}
		for _, d := range Decays {
			if val == d {
				v.Decay = d
				return nil
			}
		}
		return errors.Errorf("decay=%s: one of %s", val, strings.Join(Decays, ", "))
	}
	p, ok := v.floats()[k]
	if !ok {
		return errors.Errorf("no parameter %q (one of %s)", k, strings.Join(variantKeys, ", "))
	}
	if *p != nil {
		return errors.Errorf("%s given twice", k)
	}
	x, err := strconv.ParseFloat(val, 64)
	ranges := map[string]struct {
		lo, hi   float64
		closedHi bool
	}{"warmup": {0, 1, false}, "t1": {0, 1, true}, "t2": {0, 1, false}, "lr": {0, 10, true}, "momentum": {0, 1, false}}
	r := ranges[k]
	inRange := x >= r.lo && (x < r.hi || r.closedHi && x == r.hi) && !(k == "lr" && x == 0)
	if err != nil || !inRange {
		return errors.Errorf("%s=%s: a number in %s", k, val, map[string]string{"warmup": "[0, 1)", "t1": "[0, 1]", "t2": "[0, 1)", "lr": "(0, 10]", "momentum": "[0, 1)"}[k])
	}
	*p = &x
	return nil
}

// SplitList splits a comma-separated list, keeping the commas inside
// parentheses ("pipemare,spike(warmup=0.1,t1=0.5)" is two items) and
// dropping empty items.
func SplitList(s string) []string {
	var out []string
	depth, start := 0, 0
	add := func(end int) {
		if item := strings.TrimSpace(s[start:end]); item != "" {
			out = append(out, item)
		}
	}
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth == 0:
			add(i)
			start = i + 1
		}
	}
	add(len(s))
	return out
}
