package runout

import (
	"strconv"

	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/pkg/errors"
)

// StageCount is the number of stages P that stages ("fine": one per layer,
// or a number) cuts the recipe's model into.
func StageCount(r zoo.Recipe, stages string) (int, error) {
	cfg := train.Config{Hyper: r.Run}
	if stages != "fine" {
		p, err := strconv.Atoi(stages)
		if err != nil || p < 1 {
			return 0, errors.Errorf("stages %q: a positive number or fine", stages)
		}
		cfg.Stages = p
	}
	_, plan, err := cfg.Split(r.Build) // the cut the sweep's trainings make
	if err != nil {
		return 0, err
	}
	defer plan.Close()
	return len(plan.Stages), nil
}
