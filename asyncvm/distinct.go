package asyncvm

import (
	"reflect"

	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// solverOwners remembers which stage each solver layer was given to, so
// that one solver handed to two stages is refused: a solver keeps one
// stage's state (a velocity per learnable, T2's δ, step counts) and is
// stepped from that stage's goroutine only, so two stages sharing it race
// and train wrong.
type solverOwners map[gorgonia.Solver]int

// claim records stage's solver s, layer by layer (solvers.Chain), and
// fails naming both stages when a layer is already another stage's.
// Layers that are not pointers hold no state they could share and are
// not compared.
func (o solverOwners) claim(stage int, s gorgonia.Solver) error {
	for j, l := range solvers.Chain(s) {
		if reflect.ValueOf(l).Kind() != reflect.Pointer {
			continue
		}
		if other, ok := o[l]; ok && other != stage {
			return errors.Errorf("asyncvm: stages %d and %d were given the same solver (layer %d of stage %d's, a %T): a solver keeps one stage's state, so the WithSolver factory must build a new solver (and new decorators) for every stage it is called with", other, stage, j, stage, l)
		}
		o[l] = stage
	}
	return nil
}
