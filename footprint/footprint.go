package footprint

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pkg/errors"
)

// Table is what every stage of a plan holds besides activations, under
// PipeMare with T2 and under PipeDream's weight stashing, for N microbatches
// a minibatch and a solver keeping SolverSlots weight-sized tensors per
// learnable (0 for SGD, 1 for Momentum, 2 for Adam). Bytes throughout.
type Table struct {
	Microbatches int
	SolverSlots  int
	Stages       []Row
	// Total sums the stages; its Delay is the largest.
	Total Row
}

// Row is one stage's memory.
type Row struct {
	Stage int // −1 for the total
	// Delay is τ_i = ceil((2(P−1−i)+1)/N) (schedule.Delay): how many
	// updates old the weights a forward reads are.
	Delay int
	// Weights are the stage's learnables.
	Weights int64
	// Optimizer is the solver's state: SolverSlots × Weights.
	Optimizer int64
	// Correction is T2's velocity δ, one weight-sized buffer: what
	// PipeMare adds.
	Correction int64
	// WeightStash is what PipeDream adds: the τ_i older versions of the weights
	// that forwards in flight read and their backwards must read again
	// (τ_i + 1 versions with the current one).
	WeightStash int64
}

// PipeMare is the row's memory under PipeMare with T2: one copy of the
// weights, the solver's state and δ.
func (r Row) PipeMare() int64 { return r.Weights + r.Optimizer + r.Correction }

// PipeDream is the row's memory under PipeDream: the weights, the solver's
// state and the stashed versions.
func (r Row) PipeDream() int64 { return r.Weights + r.Optimizer + r.WeightStash }

// Of computes the table of plan for n microbatches a minibatch and a solver
// with solverSlots weight-sized tensors per learnable. It reads the plan's
// stages only; nothing runs.
func Of(plan *graphsplit.Plan, n, solverSlots int) (*Table, error) {
	if plan == nil || len(plan.Stages) == 0 {
		return nil, errors.New("footprint: no plan")
	}
	if n < 1 || solverSlots < 0 {
		return nil, errors.Errorf("footprint: %d microbatches and %d solver slots: want N ≥ 1 and slots ≥ 0", n, solverSlots)
	}
	p := len(plan.Stages)
	t := &Table{Microbatches: n, SolverSlots: solverSlots, Total: Row{Stage: -1}}
	for i, st := range plan.Stages {
		var w int64
		for _, l := range st.Learnables {
			w += int64(l.Shape().TotalSize()) * int64(l.Dtype().Size())
		}
		tau := schedule.Delay(p, n, i)
		r := Row{Stage: i, Delay: tau, Weights: w, Optimizer: int64(solverSlots) * w, Correction: w, WeightStash: int64(tau) * w}
		t.Stages = append(t.Stages, r)
		t.Total.Delay = max(t.Total.Delay, tau)
		t.Total.Weights += r.Weights
		t.Total.Optimizer += r.Optimizer
		t.Total.Correction += r.Correction
		t.Total.WeightStash += r.WeightStash
	}
	return t, nil
}

// Ratio is PipeDream's total over PipeMare's: how many times less memory
// PipeMare with T2 needs for weights, optimizer state and its own buffers.
func (t *Table) Ratio() float64 {
	return float64(t.Total.PipeDream()) / float64(t.Total.PipeMare())
}

// Write writes the table — one row per stage when perStage, then the total
// — in KiB, or MiB from 64 MiB, and the ratio.
func (t *Table) Write(w io.Writer, perStage bool) error {
	unit, scale := "MiB", float64(1<<20)
	if t.Total.PipeDream() < 64<<20 {
		unit, scale = "KiB", 1<<10
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "stage\tτ\tweights %[1]s\toptimizer %[1]s\tT2 δ %[1]s\tPipeDream stash %[1]s\tPipeMare+T2 %[1]s\tPipeDream %[1]s\t\n", unit)
	row := func(name string, r Row) {
		fmt.Fprintf(tw, "%s\t%d", name, r.Delay)
		for _, b := range []int64{r.Weights, r.Optimizer, r.Correction, r.WeightStash, r.PipeMare(), r.PipeDream()} {
			fmt.Fprintf(tw, "\t%.1f", float64(b)/scale)
		}
		fmt.Fprint(tw, "\t\n")
	}
	if perStage {
		for _, r := range t.Stages {
			row(fmt.Sprint(r.Stage), r)
		}
	}
	row("total", t.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d stages, N = %d, solver state %d× the weights: PipeDream needs %.2f× PipeMare+T2's memory for weights, optimizer state and the method's buffers (the paper: up to 2.7×; activations, the same for both, are not counted)\n",
		len(t.Stages), t.Microbatches, t.SolverSlots, t.Ratio())
	return err
}
