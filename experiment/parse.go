package experiment

import (
	"strconv"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pkg/errors"
)

// ParseVariants reads a comma-separated list of variants (ParseVariant),
// which must hold the baseline's.
func ParseVariants(list, baseline string) ([]Variant, error) {
	var out []Variant
	found := false
	for _, s := range SplitList(list) {
		v, err := ParseVariant(s)
		if err != nil {
			return nil, err
		}
		found = found || v.String() == baseline
		out = append(out, v)
	}
	switch {
	case len(out) == 0:
		return nil, errors.New("no method")
	case !found:
		return nil, runspec.Errorf("the baseline %s ({baseline}) is not among them", baseline)
	}
	return out, nil
}

// ParseEpochs reads a comma-separated list of run lengths in epochs, at
// least one, each ≥ 0 (0: the recipe's).
func ParseEpochs(list string) ([]int, error) {
	var out []int
	for _, v := range SplitList(list) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, errors.Errorf("%q is not a number of epochs", v)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no length")
	}
	return out, nil
}

// ParseSeeds reads a comma-separated list of seeds, at least one.
func ParseSeeds(list string) ([]int64, error) {
	var out []int64
	for _, v := range SplitList(list) {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, errors.Errorf("%q is not a number", v)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("no seed")
	}
	return out, nil
}
