package runout

import (
	"fmt"
	"io"

	"github.com/pipemare/pipemare/schedule"
)

// TableStages and TableMicrobatches are the P and N of the replay table
// (WriteReplayTable).
var (
	TableStages       = []int{2, 4, 8, 16, 32}
	TableMicrobatches = []int{1, 2, 4, 8, 16, 32}
)

// WriteReplayTable writes, as a Markdown table, every schedule's replay on
// one virtual device per worker (schedule.Table over TableStages and
// TableMicrobatches, equal F, I and W times, a whole backward two): its
// bubble fraction, the activations a worker holds at most (microbatches
// through all its layers) and the weight versions a stage holds, each
// beside its formula where the formula holds ("—" where it does not).
func WriteReplayTable(w io.Writer) error {
	if _, err := fmt.Fprintln(w, "| schedule | P | N | steps | bubble | formula | activations | formula | weights | formula |\n|---|---|---|---|---|---|---|---|---|---|"); err != nil {
		return err
	}
	for _, r := range schedule.Table(schedule.All(), TableStages, TableMicrobatches) {
		f := [3]string{"—", "—", "—"}
		if r.Holds {
			f = [3]string{fmt.Sprintf("%.4f", r.Formula.Bubble), fmt.Sprintf("%.2f", r.Formula.Activations), fmt.Sprintf("%g", r.Formula.Weights)}
		}
		if _, err := fmt.Fprintf(w, "| %s | %d | %d | %d | %.4f | %s | %.2f | %s | %g | %s |\n", r.Schedule, r.P, r.N, r.Steps,
			r.Measured.Bubble, f[0], r.Measured.Activations, f[1], r.Measured.Weights, f[2]); err != nil {
			return err
		}
	}
	return nil
}
