package train

import (
	"fmt"

	"github.com/pkg/errors"
)

// MaxSteps is the most optimizer steps (epochs × steps per epoch) a run
// trains. The engine keeps the timing of every action it ran for its
// report and trace (an asyncvm.Event of 64 bytes per forward, backward and
// update of each stage: (2N + 1)·P a step), so a run's memory grows with
// its length: 10⁷ steps of the smallest pipeline (P = 2, N = 1) hold 3.8
// GB of them. A longer run is a mistyped length, refused before it
// trains, not one that fails days later.
const MaxSteps = 10_000_000

// checkLength refuses a run of epochs of stepsPerEpoch minibatches longer
// than MaxSteps, naming what (Config.Epochs) and the most epochs it can
// be.
func checkLength(what string, epochs, stepsPerEpoch int) error {
	if epochs > MaxSteps/stepsPerEpoch {
		return errors.Errorf("%s %d: %s", what, epochs, lengthReason(epochs, stepsPerEpoch))
	}
	return nil
}

// lengthReason says why epochs of stepsPerEpoch minibatches are too many.
func lengthReason(epochs, stepsPerEpoch int) string {
	return fmt.Sprintf("%d epochs of %d steps are more than the %d steps a run can train (the engine keeps every action's timing for its report); give at most %d", epochs, stepsPerEpoch, MaxSteps, MaxSteps/stepsPerEpoch)
}
