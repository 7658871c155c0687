package zoo_test

import (
	"context"
	"math"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/zootest"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// oneBatchBaseline names the models whose accuracy checks train the
// synchronous baseline on each minibatch as one batch (microbatchMeans)
// instead of accumulating its microbatches: the Transformers, whose cost
// is a mean over target positions and whose rows meet only within a word,
// so one batch computes the same cost and gradient, in real arithmetic,
// 1.5× cheaper (their 2-word microbatches leave the GEMMs small). The
// Fashion-MNIST models keep their microbatches: BatchNorm's statistics
// are per microbatch, and the MLP's baseline is cheap and bit-identical
// to its pipeline's (TestOneStageBaselineIsThePipelinesBitForBit).
var oneBatchBaseline = map[string]bool{"transformer": true, "transformer-tied": true}

// microbatchMeans packs each minibatch of G2P data as one batch whose cost
// is the mean of its microbatches' costs, as the pipeline computes it. The
// Transformer's cost is −Σ y·log p / Σ y over the batch's target positions;
// weighting the target rows of microbatch k (words examples) by 1/n_k, n_k
// its number of targets, makes Σ y the number of microbatches N and the
// cost (1/N) Σ_k (−Σ_k y·log p / n_k): the mean of the microbatch costs,
// whose gradient is the mean gradient a step of the pipeline applies.
type microbatchMeans struct {
	zoo.Data
	words int
}

func (d microbatchMeans) Batch(m *zoo.Model, idx []int) (*tensor.Dense, *tensor.Dense) {
	x, y := d.Data.Batch(m, idx)
	ys := y.Data().([]float32)
	per := d.words * zoo.G2PLen * zoo.G2PVocab
	for lo := 0; lo < len(ys); lo += per {
		group := ys[lo:min(lo+per, len(ys))]
		var n float32
		for _, v := range group {
			n += v
		}
		for i, v := range group {
			if v != 0 {
				group[i] = v / n
			}
		}
	}
	return x, y
}

// TestOneBatchBaselineTrainsLikeItsMicrobatches trains the Transformer's
// synchronous baseline a few steps both ways — the recipe's 16
// microbatches of 2 words accumulated, and as its accuracy check trains it
// (runConfig, checkData: each minibatch one batch of 32, weighted by
// microbatchMeans) — and requires every weight to agree to float32
// rounding (measured: 8e-8 of the weight); unweighted, one batch trains a
// different model (4e-3), so the weighting is what makes them agree.
func TestOneBatchBaselineTrainsLikeItsMicrobatches(t *testing.T) {
	zootest.ForEachModel(t, []string{"transformer"}, func(t *testing.T, r zoo.Recipe) {
		data, test := zootest.FewSteps(t, r, 3, 100)
		r.Run.Epochs = 1
		run := func(data zoo.Data, cfg train.Config) [][]float32 {
			res, err := train.Train(context.Background(), r.Build, data, test, cfg)
			require.NoError(t, err)
			var w [][]float32
			for _, l := range res.Plan.Learnables {
				w = append(w, append([]float32(nil), l.Value().Data().([]float32)...))
			}
			return w
		}
		baseline := checkRun{kind: "sequential", seed: r.Run.Seed}
		cfg, err := runConfig(r, baseline, 3) // the check's
		require.NoError(t, err)
		require.Equal(t, 1, cfg.Microbatches, "the check's baseline trains one batch per step")
		one, unweighted := run(checkData(r, baseline, data), cfg), run(data, cfg)
		cfg.Microbatch, cfg.Microbatches = r.Run.Microbatch, r.Run.Microbatches
		micro := run(data, cfg)
		worst := func(a, b [][]float32) float64 {
			d := 0.0
			for i := range a {
				for j := range a[i] {
					d = math.Max(d, math.Abs(float64(a[i][j]-b[i][j]))/(1+math.Abs(float64(a[i][j]))))
				}
			}
			return d
		}
		t.Logf("relative differences: weighted %.2g, unweighted %.2g", worst(micro, one), worst(micro, unweighted))
		require.LessOrEqual(t, worst(micro, one), 1e-5, "one weighted batch trains as the microbatches do")
		require.Greater(t, worst(micro, unweighted), 1e-4, "without the weights one batch trains otherwise (else the weighting shows nothing)")
	})
}
