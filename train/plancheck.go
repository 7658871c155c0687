package train

import (
	"fmt"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/zoo"
)

// PlanCosts are the estimated costs of the stages cfg cuts r's model into
// (graphsplit.Plan.Costs, one per stage), cut as Train and ServeStage cut
// it (Config.Split), so that a command can refuse a run that does not fit
// the plan — or place its stages (launch.Hosts) — before it trains
// anything. stages is
// the number of stages as the command line gave it (-stages), for the
// error. A cut that cannot be made, and more stages than the model has
// layers, are a *runspec.Error of the cut or stages setting; any other
// failure is returned as it is.
func PlanCosts(r zoo.Recipe, cfg Config, stages string) ([]float64, error) {
	_, plan, err := cfg.Split(r.Build)
	if err != nil && cfg.Cut != nil {
		return nil, &runspec.Error{Setting: "cut", Value: runspec.FormatCut(cfg.Cut), Reason: err.Error()}
	}
	var tm *graphsplit.TooManyStagesError
	if errors.As(err, &tm) {
		return nil, &runspec.Error{Setting: "stages", Value: stages, Reason: fmt.Sprintf("the %s model cuts into at most %d stages, one per layer ({stages} fine)", r.Model, tm.Most)}
	}
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	return plan.Costs(), nil
}
