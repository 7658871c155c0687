package main

import (
	"fmt"
	"io"

	"github.com/pipemare/pipemare/footprint"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// writeMemory writes plan's memory table (package footprint: weights,
// solver state, T2's δ against PipeDream's stash) per stage for the
// model's recipe — its N and its solver (Momentum: one weight-sized slot,
// SGD: none) — and its total at N = 1 (PipeDream's own setting, the
// largest delays). pipemare plan calls it after the stage table.
func writeMemory(w io.Writer, model string, plan *graphsplit.Plan) error {
	r, err := zoo.RecipeFor(model)
	if err != nil {
		return err
	}
	slots := 1
	if r.Run.NoMomentum {
		slots = 0
	}
	fmt.Fprintf(w, "\nmemory besides activations, %s's recipe (N = %d, %s):\n", model, r.Run.Microbatches, train.Config{Hyper: r.Run}.SolverName())
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
