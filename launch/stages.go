package launch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
)

// StagesPlaces are the places of a stage process that hosts the stages
// listed, as StagePlace makes one for each, listening on listens (one per
// stage, in the same order; none: each on its own address). The
// addresses are one per process (Place.Addrs): CheckHosted checks the
// stages against them once the plan is known. Under a launcher it is the
// process's one place (StagePlace), whose stages Launched gives once the
// plan is known, checking the stages listed against them.
// It refuses, naming the flag, an empty or repeated list, listens that
// are not one per stage, and, under a launcher, more than one listen (its
// k-th stage listens at the first's port+k·Stride).
func (n Net) StagesPlaces(stages []int, listens []string, env Config, found bool) ([]Place, error) {
	switch {
	case len(stages) == 0:
		return nil, &runspec.Error{Setting: "stage", Reason: "which stages this process serves"}
	case found && len(listens) > 1:
		return nil, &runspec.Error{Setting: "listen", Value: strings.Join(listens, ","), Reason: fmt.Sprintf("under %s, the first stage's address: the k-th listens at its port+k·%d", env.Launcher, max(env.Stride, 1))}
	case found || len(stages) == 1 && len(listens) <= 1:
		listen := ""
		if len(listens) == 1 {
			listen = listens[0]
		}
		pl, err := n.stagePlace(stages[0], listen, env, found)
		return []Place{pl}, err
	}
	if len(listens) > 0 && len(listens) != len(stages) {
		return nil, &runspec.Error{Setting: "listen", Value: strings.Join(listens, ","), Reason: fmt.Sprintf("one per stage of {stage} %s, in the same order", StageList(stages))}
	}
	pls := make([]Place, len(stages))
	for k, i := range stages {
		if slices.Contains(stages[:k], i) {
			return nil, &runspec.Error{Setting: "stage", Value: StageList(stages), Reason: fmt.Sprintf("stage %d is listed twice", i)}
		}
		listen := ""
		if len(listens) > 0 {
			listen = listens[k]
		}
		pl, err := n.stagePlace(i, listen, env, found)
		if err != nil {
			return nil, err
		}
		pls[k] = pl
	}
	return pls, nil
}

// Launched is the places of the stages the process at pl hosts under a
// launcher (pl: StagePlace's, or StagesPlaces' one, under that launcher,
// whose Stage is the process's rank), for a plan whose stages have these
// costs (graphsplit.Plan.Costs): the stages the run's placement gives
// that rank (Place.Hosts over the processes' addresses), the k-th
// listening at pl.Listen's port+k·Stride ("": its own address). listed,
// if not nil, are the stages a command line gave (-stage): they must be
// those. Its errors are *runspec.Error naming the setting.
func Launched(pl Place, listed []int, costs []float64) ([]Place, error) {
	hosts, err := pl.Hosts(costs)
	if err != nil {
		return nil, err
	}
	stages := hosts[pl.Stage]
	if listed != nil && !slices.Equal(listed, stages) {
		placement, _ := placementOf(pl.Spec) // Hosts has placed by it
		return nil, &runspec.Error{Setting: "stage", Value: StageList(listed), Reason: fmt.Sprintf("the %s environment makes this process rank %d of %d, which hosts stages %s of %d placed %v", pl.Launcher, pl.Stage, len(hosts), StageList(stages), len(costs), placement)}
	}
	pls := make([]Place, len(stages))
	for k, i := range stages {
		pls[k] = pl
		pls[k].Stage = i
		if pl.Listen != "" && k > 0 {
			if strings.HasPrefix(pl.Listen, "fd:") {
				return nil, &runspec.Error{Setting: "listen", Value: pl.Listen, Reason: fmt.Sprintf("an inherited socket serves one stage, and this process hosts stages %s: give :port (its k-th stage listens at port+k·%d)", StageList(stages), max(pl.Stride, 1))}
			}
			if pls[k].Listen, err = pl.nth(pl.Listen, k, len(stages)); err != nil {
				return nil, &runspec.Error{Setting: "listen", Value: pl.Listen, Reason: err.Error()}
			}
		}
	}
	return pls, nil
}

// StageList is stages as a command line lists them: "0,2".
func StageList(stages []int) string { return runspec.FormatCut(stages) } // the same comma-separated form as a cut

// ParseStageList reads a StageList; an element that is not a stage index
// (0 or more) is an error quoting it.
func ParseStageList(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 {
			return nil, errors.Errorf("%q is not a stage, 0 or more", f)
		}
		out = append(out, i)
	}
	return out, nil
}

// StagesConnector opens the endpoints of the stages a process hosts, one
// Place each (StagesPlaces, with the run's Spec), parallel to pls: each
// with Connector, all at once (the process's stages may wait for each
// other's connections), joined by transport.Colocated so that a message
// between two of them never leaves the process (Place.Layout leaves
// their links off the network). It refuses what CheckHosted refuses; on
// an error nothing is left open.
func (n Net) StagesConnector(pls []Place) func(ctx context.Context, plan *graphsplit.Plan) ([]transport.Endpoint, error) {
	return func(ctx context.Context, plan *graphsplit.Plan) ([]transport.Endpoint, error) {
		if err := CheckHosted(pls, plan.Costs()); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		eps := make([]transport.Endpoint, len(pls))
		errs := make([]error, len(pls))
		var wg sync.WaitGroup
		for k, pl := range pls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				eps[k], errs[k] = n.Connector(pl)(ctx, plan)
				if errs[k] != nil {
					cancel() // the others would wait for the connect timeout
				}
			}()
		}
		wg.Wait()
		if err := firstCause(errs); err != nil {
			for _, ep := range eps {
				if ep != nil {
					_ = ep.Close()
				}
			}
			return nil, err
		}
		if len(eps) == 1 {
			return eps, nil
		}
		return transport.Colocated(eps), nil
	}
}

// CheckHosted refuses, with a *runspec.Error naming the stage setting,
// the places of a process (one per stage, alike but for Stage and
// Listen; StagesPlaces) whose stages are not those the run's placement
// gives one of the processes at their addresses (Place.Hosts), for a plan
// whose stages have these costs (graphsplit.Plan.Costs): so that a
// command can say so before anything connects, naming the lists the
// placement makes. StagesConnector checks it too.
func CheckHosted(pls []Place, costs []float64) error {
	p := len(costs)
	if len(pls) == 0 {
		return &runspec.Error{Setting: "stage", Reason: "which stages this process serves"}
	}
	stages := make([]int, len(pls))
	for k, pl := range pls {
		stages[k] = pl.Stage
	}
	hosts, err := pls[0].Hosts(costs)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if slices.Contains(h, stages[0]) {
			if slices.Equal(h, stages) {
				return nil
			}
			var lists []string
			for _, h := range hosts {
				lists = append(lists, StageList(h))
			}
			placement, _ := placementOf(pls[0].Spec) // Hosts has placed by it
			return &runspec.Error{Setting: "stage", Value: StageList(stages), Reason: fmt.Sprintf("placed %v, the %d stages on %d processes make processes of stages %s: give one of those", placement, p, len(hosts), strings.Join(lists, " or "))}
		}
	}
	return &runspec.Error{Setting: "stage", Value: StageList(stages), Reason: fmt.Sprintf("the plan has stages 0..%d", p-1)}
}

// firstCause is the first error of errs that is not the cancelling of
// the others a failure caused, else the first error, or nil.
func firstCause(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}
