package runout

import (
	"time"

	"github.com/pipemare/pipemare/train"
)

// TimeToTarget is a run's training time (evaluation excluded) until the
// first epoch whose test accuracy reached target, 0 when none did.
func TimeToTarget(res *train.Result, target float64) time.Duration {
	at := FirstAtTarget(res.Epochs, target)
	elapsed := time.Duration(0)
	for _, e := range res.Epochs[:at+1] {
		elapsed += e.Wall
	}
	return elapsed
}

// FirstAtTarget is the index of the first complete epoch whose test
// accuracy reached target, -1 when none did.
func FirstAtTarget(epochs []train.EpochResult, target float64) int {
	for i, e := range epochs {
		if !e.Interrupted && e.Accuracy >= target {
			return i
		}
	}
	return -1
}
