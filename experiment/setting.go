package experiment

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
	"github.com/pkg/errors"
)

// Setting is one delay setting of a sweep: N microbatches at the recipe's
// minibatch (the pipeline's own delays), or delays injected into the
// recipe's run.
type Setting struct {
	// Label names the setting: "N=4", "fixed:8", "exp:4".
	Label string `json:"label"`
	// Microbatches and MicrobatchRows are N and the rows of a microbatch.
	Microbatches   int `json:"microbatches"`
	MicrobatchRows int `json:"microbatch_rows"`
	// Injected is "fixed:D" (every stage's forwards read weights D updates
	// old) or "exp:μ" (a truncated exponential of mean μ, at most 4μ, drawn
	// per stage and step); empty for a pipeline's own delays.
	Injected string `json:"injected,omitempty"`
	// Tau0 is the first stage's delay (the largest): τ_0 = ceil((2P−1)/N)
	// for a pipeline, D or μ for injected delays.
	Tau0 float64 `json:"tau0"`
}

// ParseSettings reads the settings of a sweep: values of N
// (comma-separated) and injected delays ("fixed:D" with D a positive
// integer, "exp:μ" with μ > 0). Fill completes them.
func ParseSettings(microbatches, delays string) ([]Setting, error) {
	var out []Setting
	for _, v := range SplitList(microbatches) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, errors.Errorf("microbatches %q: %q is not a positive number", microbatches, v)
		}
		out = append(out, Setting{Label: fmt.Sprintf("N=%d", n), Microbatches: n})
	}
	for _, v := range SplitList(delays) {
		kind, x, _ := strings.Cut(v, ":")
		d, err := strconv.ParseFloat(x, 64)
		if (kind != "fixed" && kind != "exp") || err != nil || !(d > 0) || (kind == "fixed" && d != math.Trunc(d)) {
			return nil, errors.Errorf("delays %q: %q is neither fixed:D (D a positive integer) nor exp:μ (μ > 0)", delays, v)
		}
		out = append(out, Setting{Label: v, Injected: v, Tau0: d})
	}
	return out, nil
}

// Fill sets each setting's N and rows from the recipe's run (N × rows is
// the recipe's minibatch, which each N must divide) and a pipeline's τ_0
// on p stages.
func Fill(settings []Setting, run zoo.Hyper, p int) error {
	batch := run.Microbatch * run.Microbatches
	for i := range settings {
		s := &settings[i]
		if s.Injected != "" {
			s.Microbatches, s.MicrobatchRows = run.Microbatches, run.Microbatch
			continue
		}
		if batch%s.Microbatches != 0 {
			return errors.Errorf("microbatches: N=%d does not divide the recipe's minibatch of %d rows (%d × %d)", s.Microbatches, batch, run.Microbatches, run.Microbatch)
		}
		s.MicrobatchRows = batch / s.Microbatches
		s.Tau0 = float64(schedule.Delay(p, s.Microbatches, 0))
	}
	return nil
}

// source is the injected delay source for p stages (nil for none).
func (s Setting) source(p int) delay.Source {
	kind, v, _ := strings.Cut(s.Injected, ":")
	x, _ := strconv.ParseFloat(v, 64) // ParseSettings made sure
	switch kind {
	case "fixed":
		f := make(delay.Fixed, p)
		for i := range f {
			f[i] = int(x)
		}
		return f
	case "exp":
		return delay.Exponential{MeanDelay: x, Limit: int(math.Ceil(4 * x)), Seed: 1, N: s.Microbatches}
	}
	return nil
}

// key is the setting in a file name: "N4", "fixed8", "exp2_5".
func (s Setting) key() string {
	return strings.NewReplacer("=", "", ":", "", ".", "_").Replace(s.Label)
}
