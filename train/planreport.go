package train

import (
	"fmt"
	"io"
	"runtime"

	"github.com/pipemare/pipemare/footprint"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

// PlanReport is a model's plan as pipemare plan shows it: the stages,
// the time each takes on this machine and the memory each needs.
type PlanReport struct {
	Recipe zoo.Recipe
	// Model is the recipe's model as built, at its microbatch; Plan its
	// cut (the caller closes it: Close).
	Model *zoo.Model
	Plan  *graphsplit.Plan
	// Times are the stages' forward and backward times: those the cut was
	// balanced by, or measured for a cut at every layer.
	Times []graphsplit.StageTime
}

// MeasurePlan builds r's model at microbatch rows (seed 1) and cuts it
// into one stage per layer (stages 0), or into stages stages at layer
// boundaries balanced by the time each takes on this machine
// (graphsplit.Profiled on the first microbatch of r's default data, with
// the programs r.Run.KeepActivations runs), on one thread, as each stage
// of a pipeline gets about one core; a cut at every layer is timed on
// that microbatch (graphsplit.Plan.Time, the median of 5 runs). For a
// schedule whose workers host several stages each (zb-v's V,
// interleaved's round robin), the cut balances the workers, each its
// stages together (graphsplit.OnWorkers), as Train cuts for it; the zero
// Schedule runs a stage per worker. Models are built one at a time.
func MeasurePlan(r zoo.Recipe, microbatch, stages int, sch schedule.Schedule) (*PlanReport, error) {
	building.Lock()
	defer building.Unlock()
	m, err := r.Build(microbatch, 1)
	if err != nil {
		return nil, err
	}
	trainSet, _, err := r.Load("", m.Batch)
	if err != nil {
		return nil, err
	}
	feeds := zoo.FirstMicrobatch(trainSet, m)
	keep := r.Run.KeepActivations
	cfg := Config{Stages: stages, Schedule: sch, Hyper: r.Run}
	opts := cfg.cutOptions()
	if stages > 0 {
		opts = append(opts, graphsplit.Profiled(feeds, keep, cfg.fusesLast()))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
	if err != nil {
		return nil, err
	}
	p := &PlanReport{Recipe: r, Model: m, Plan: plan}
	if plan.Balance != nil {
		p.Times = plan.Balance.Times
		return p, nil
	}
	if p.Times, err = plan.Time(feeds, keep, cfg.fusesLast(), 5); err != nil {
		plan.Close()
		return nil, err
	}
	return p, nil
}

// Write writes the report: a heading naming the model, its microbatch and
// its number of stages, the stage table (graphsplit.Plan.WriteTable),
// their balance (WriteBalance) and their memory (WriteMemory).
func (p *PlanReport) Write(w io.Writer) error {
	fmt.Fprintf(w, "%s at microbatch %d: %d stages\n", p.Model.Name, p.Model.Batch, len(p.Plan.Stages))
	if err := p.Plan.WriteTable(w); err != nil {
		return err
	}
	if err := p.Plan.WriteBalance(w, p.Times); err != nil {
		return err
	}
	return WriteMemory(w, p.Recipe, p.Plan)
}

// Close closes the plan.
func (p *PlanReport) Close() { p.Plan.Close() }

// WriteMemory writes plan's memory table (package footprint: weights,
// solver state, T2's δ against PipeDream's stash, per stage) for r's
// recipe — its N and its solver (Momentum: one weight-sized slot, SGD:
// none) — then the same at N = 1 (PipeDream's own setting, the largest
// delays) when the recipe's N is not 1, after a blank line and a heading
// that names the recipe: what pipemare plan prints after the stage table.
func WriteMemory(w io.Writer, r zoo.Recipe, plan *graphsplit.Plan) error {
	slots := 1
	if r.Run.NoMomentum {
		slots = 0
	}
	fmt.Fprintf(w, "\nmemory besides activations, %s's recipe (N = %d, %s):\n", r.Model, r.Run.Microbatches, Config{Hyper: r.Run}.SolverName())
	for i, n := range []int{r.Run.Microbatches, 1} {
		if i > 0 && n == r.Run.Microbatches {
			break
		}
		t, err := footprint.Of(plan, n, slots)
		if err != nil {
			return err
		}
		if err := t.Write(w, i == 0); err != nil {
			return err
		}
	}
	return nil
}
