package train

import (
	"fmt"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/zoo"
)

// PlanStages is the number of stages cfg cuts r's model into, cut as
// Train and ServeStage cut it (Config.Split), so that a command can refuse
// a run that does not fit the plan before it trains anything. stages is
// the number of stages as the command line gave it (-stages), for the
// error. A cut that cannot be made, and more stages than the model has
// layers, are a *runspec.Error of the cut or stages setting; any other
// failure is returned as it is.
func PlanStages(r zoo.Recipe, cfg Config, stages string) (int, error) {
	_, plan, err := cfg.Split(r.Build)
	if err != nil && cfg.Cut != nil {
		return 0, &runspec.Error{Setting: "cut", Value: runspec.FormatCut(cfg.Cut), Reason: err.Error()}
	}
	var tm *graphsplit.TooManyStagesError
	if errors.As(err, &tm) {
		return 0, &runspec.Error{Setting: "stages", Value: stages, Reason: fmt.Sprintf("the %s model cuts into at most %d stages, one per layer ({stages} fine)", r.Model, tm.Most)}
	}
	if err != nil {
		return 0, err
	}
	defer plan.Close()
	return len(plan.Stages), nil
}
