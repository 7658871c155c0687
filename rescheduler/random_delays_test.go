package rescheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
)

// TestT1WithRandomDelays is the PipeMare paper's Hogwild-style experiment on
// a small real model: the zoo MLP (3 stages) on the embedded Fashion-MNIST
// subset, 2 epochs of Momentum(0.9) with a cosine schedule from 0.05, every
// stage's forwards reading weights delayed by a truncated exponential delay
// (mean μ, at most 4μ) drawn per step. T1 (rescheduling over the whole run)
// must get much closer to delay-free training than naive training does.
// The table is printed for the README (go test -run TestT1WithRandomDelays
// -v ./rescheduler/).
func TestT1WithRandomDelays(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 5 models for 2 epochs each")
	}
	trainSet, test, err := zoo.LoadFashionMNIST("embedded")
	require.NoError(t, err)
	const microbatch, epochs = 32, 2
	steps := epochs * trainSet.Len() / microbatch
	run := func(mean float64, t1 int) (loss, acc float64, err error) {
		c := train.Config{Hyper: zoo.Hyper{Microbatch: microbatch, Microbatches: 1, Epochs: epochs, LR: 0.05, Cosine: true, Seed: 1}, T1: t1, Delays: delay.Exponential{MeanDelay: mean, Limit: int(4 * mean), Seed: 1, N: 1}}
		r, err := train.Train(context.Background(), zoo.MLP, trainSet, test, c)
		if err != nil {
			return 0, 0, err
		}
		e := r.Epochs[len(r.Epochs)-1]
		return e.Loss, e.Accuracy, nil
	}
	var table strings.Builder
	table.WriteString("| mean delay | T1 | final train loss | test accuracy |\n|---|---|---|---|\n")
	row := func(mean float64, t1 int, loss, acc float64, err error) {
		on := "no"
		if t1 > 0 {
			on = fmt.Sprintf("yes (K=%d)", t1)
		}
		if err != nil {
			fmt.Fprintf(&table, "| %g | %s | diverged | — |\n", mean, on)
			return
		}
		fmt.Fprintf(&table, "| %g | %s | %.3f | %.3f |\n", mean, on, loss, acc)
	}
	freeLoss, free, err := run(0, 0)
	require.NoError(t, err)
	row(0, 0, freeLoss, free, nil)
	for _, mean := range []float64{4, 8} {
		nl, naive, nerr := run(mean, 0)
		row(mean, 0, nl, naive, nerr)
		tl, t1, err := run(mean, steps)
		row(mean, steps, tl, t1, err)
		require.NoError(t, err, "T1 at mean delay %g", mean)
		require.Less(t, free-t1, 0.06, "T1 at mean delay %g stays within 6 points of delay-free (%.3f vs %.3f)", mean, t1, free)
		if nerr == nil {
			require.Greater(t, t1-naive, 0.1, "T1 beats naive by 10 points at mean delay %g (%.3f vs %.3f)", mean, t1, naive)
		}
	}
	t.Logf("delay-free, naive and T1 training under random delays (zoo MLP, 3 stages, embedded Fashion-MNIST, 2 epochs):\n%s", table.String())
}
