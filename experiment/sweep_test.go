package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipemare/pipemare/internal/jsonkeys"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// examples is a data set of n examples that is never read: the fake
// trainer does not train.
type examples int

func (d examples) Len() int                                   { return int(d) }
func (examples) Batch(*zoo.Model, []int) (x, y *tensor.Dense) { return nil, nil }

// fakeAccuracy is what fakeTrainer makes a run end with: 0.8 + 0.01 per
// epoch + 0.001 × seed, less 5 points for naive asynchrony and 2.5/epochs
// points for the corrected methods; prediction diverges.
func fakeAccuracy(c train.Config) float64 {
	acc := 0.8 + 0.01*float64(c.Epochs) + 0.001*float64(c.Seed)
	switch {
	case c.Schedule.Async && c.T1 == 0 && !c.Spike:
		acc -= 0.05
	case c.Schedule.Async:
		acc -= 0.025 / float64(c.Epochs)
	}
	return acc
}

// fakeTrainer stands in for train.Train: it counts its calls and returns a
// result of fakeAccuracy, failing the runs fail names once.
type fakeTrainer struct {
	mu    sync.Mutex
	calls []train.Config
	fail  map[int64]bool // seeds whose first naive run fails
}

func (f *fakeTrainer) trainSet(ctx context.Context, _ zoo.Builder, _, _ zoo.Data, c train.Config) (*train.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	fail := f.fail[c.Seed] && c.Schedule.Async && c.T1 == 0 && !c.Spike && !c.Predict
	if fail {
		delete(f.fail, c.Seed)
	}
	f.mu.Unlock()
	switch {
	case fail:
		return nil, errors.New("disk full")
	case c.Predict:
		return nil, errors.New("train: step 3: the loss is NaN")
	}
	acc := fakeAccuracy(c)
	res := &train.Result{ModelAccuracy: acc, WeightsSHA256: fmt.Sprintf("w%.4f", acc)}
	for e := 1; e <= c.Epochs; e++ {
		res.Epochs = append(res.Epochs, train.EpochResult{Epoch: e, Accuracy: acc - 0.01*float64(c.Epochs-e), Loss: 1 / float64(e), Wall: time.Second})
	}
	return res, nil
}

func fakeSweep(t *testing.T, f *fakeTrainer, dir string, methods ...string) *Sweep {
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	sets, err := ParseSettings("4", "")
	require.NoError(t, err)
	var vs []Variant
	for _, m := range methods {
		vs = append(vs, mustVariant(t, m))
	}
	return &Sweep{
		Grid: Grid{Model: "mlp", Data: "embedded", Stages: "fine", Methods: vs, Settings: sets,
			Epochs: []int{1, 2, 4}, Seeds: []int64{1, 2, 3}, CheckpointEvery: 100, Target: 0.815},
		Recipe: r, TrainData: examples(640), TestData: examples(10),
		Cache: Cache{Dir: filepath.Join(dir, "runs")}, Work: filepath.Join(dir, "work"), Out: filepath.Join(dir, "out"),
		Jobs: 2, Trainer: f.trainSet,
	}
}

// TestSweep runs a sweep of fake runs (no training): every run lands in
// the cache as it finishes; the summary has each cell's mean and sample
// standard deviation over seeds, the gap to the baseline seed by seed, the
// length from which a method stays within a point, the diverged and the
// refused; a failed run is left out and trained when the sweep runs again,
// which trains nothing else; another grid's flags under the same key are
// refused, naming the file.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	f := &fakeTrainer{fail: map[int64]bool{2: true}}
	methods := []string{"sequential", "naive", "spike(warmup=0.1)", "predict(warmup=0.1)", "predict(warmup=0.1,t2=0.5)"}
	var log strings.Builder
	s := fakeSweep(t, f, dir, methods...)
	s.Log = &log
	rep, err := s.Run(context.Background())
	require.ErrorContains(t, err, "naive-N4-e1-seed2: disk full")
	require.Contains(t, log.String(), "sweep of mlp (P=3): 5 variants × 1 settings × 3 lengths × 3 seeds = 45 runs, 0 finished before, 45 to train, 2 at a time")
	require.Len(t, f.calls, 36, "the refused runs do not train")
	files, err := os.ReadDir(s.Cache.Dir)
	require.NoError(t, err)
	require.Len(t, files, 44, "a record per run, the refused and diverged ones too; not the failed one")

	cells := map[string]Cell{}
	for _, c := range rep.Cells {
		cells[fmt.Sprintf("%s e%d", c.Method, c.Epochs)] = c
	}
	seq := cells["sequential e2"]
	require.Equal(t, []int64{1, 2, 3}, seq.Seeds)
	require.InDelta(t, 0.822, seq.Mean, 1e-12)
	require.InDelta(t, 0.001, seq.Std, 1e-12, "the sample standard deviation (n − 1)")
	require.Nil(t, seq.Gap, "the baseline has no gap")
	require.InDeltaSlice(t, []float64{0.812, 0.822}, seq.EpochMean, 1e-12)
	require.Equal(t, 20, seq.Steps)
	require.Zero(t, seq.AsyncSteps)
	require.Equal(t, 3, seq.Reached, "0.821–0.823 ≥ 0.815")
	require.Equal(t, 2*time.Second, seq.TimeToTarget)

	spike := cells["spike(warmup=0.1) e4"]
	require.Equal(t, 36, spike.AsyncSteps, "40 steps, 4 of them the warm-up")
	require.InDeltaSlice(t, []float64{-0.625, -0.625, -0.625}, spike.Gap.Points, 1e-9)
	require.InDelta(t, 0, spike.Gap.Std, 1e-9, "the seeds' offsets cancel, seed by seed")
	naive := cells["naive e1"]
	require.Equal(t, []int64{1, 3}, naive.Gap.Seeds, "seed 2 failed")
	require.InDelta(t, -5, naive.Gap.Mean, 1e-9)
	require.Equal(t, 3, cells["predict(warmup=0.1) e1"].Diverged)
	require.Contains(t, cells["predict(warmup=0.1,t2=0.5) e1"].Refused, "weight prediction (method predict) cannot have T2")

	within := map[string]Within{}
	for _, w := range rep.Within {
		within[w.Method] = w
	}
	require.Equal(t, Within{Method: "spike(warmup=0.1)", Setting: "N=4", Epochs: 4, AsyncSteps: 36, Measured: []int{1, 2, 4}}, within["spike(warmup=0.1)"], "−2.5, −1.25, then −0.625 points")
	require.Zero(t, within["naive"].Epochs, "−5 points at every length")

	md, err := os.ReadFile(filepath.Join(s.Out, "sweep.md"))
	require.NoError(t, err)
	for _, want := range []string{
		"| method | 1 epoch (10 steps) | 2 epochs (20 steps) | 4 epochs (40 steps) |",
		"| sequential | 0.8120 ± 0.0010 (3) | 0.8220 ± 0.0010 (3) | 0.8420 ± 0.0010 (3) |",
		"| spike(warmup=0.1) | -2.50 ± 0.00 (3), 9 async | -1.25 ± 0.00 (3), 18 async | -0.62 ± 0.00 (3), 36 async |",
		"| predict(warmup=0.1) | —, 3 diverged |",
		"| predict(warmup=0.1,t2=0.5) | n/a | n/a | n/a |",
		"- spike(warmup=0.1): from 4 epochs (36 asynchronous steps) on, of the lengths measured (1, 2, 4 epochs)",
		"- naive: not within 1 point at the lengths measured (1, 2, 4 epochs)",
	} {
		require.Contains(t, string(md), want)
	}
	b, err := os.ReadFile(filepath.Join(s.Out, "sweep.json"))
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(b, &keys))
	require.Empty(t, jsonkeys.NotSnakeCase(keys))
	for _, name := range []string{"sweep.svg", "gap.svg"} {
		svg, err := os.ReadFile(filepath.Join(s.Out, name))
		require.NoError(t, err)
		require.Contains(t, string(svg), "<svg", name)
	}

	// Again: only the failed run trains; the summary is complete.
	f.calls = nil
	rep, err = fakeSweep(t, f, dir, methods...).Run(context.Background())
	require.NoError(t, err)
	require.Len(t, f.calls, 1)
	require.Equal(t, int64(2), f.calls[0].Seed)
	require.Equal(t, []int64{1, 2, 3}, rep.Cells[1].Gap.Seeds, "naive at 1 epoch")

	// Other flags under the same keys: refused before anything trains.
	f.calls = nil
	other := fakeSweep(t, f, dir, methods...)
	other.CheckpointEvery = 50
	_, err = other.Run(context.Background())
	require.ErrorContains(t, err, "sequential-N4-e1-seed1.json is another run: checkpoint_every 100 there, 50 here; give another cache directory, or delete it")
	require.Empty(t, f.calls)
}

// TestWithin: the length from which the mean gap stays within the
// tolerance, or none when the longest length is outside.
func TestWithin(t *testing.T) {
	cell := func(e int, g float64) Cell {
		c := Cell{Method: "m", Setting: "N=4", Epochs: e, AsyncSteps: 10 * e}
		if !math.IsNaN(g) {
			c.Gap = &Gap{Mean: g}
		}
		return c
	}
	nan := math.NaN()
	for _, c := range []struct {
		gaps   []float64
		epochs int
	}{
		{[]float64{-3, -0.5, -1.5, -0.9, -0.2}, 4},
		{[]float64{-0.5, -0.9, -1.0}, 1},
		{[]float64{-0.5, -0.9, -1.01}, 0},
		{[]float64{-2, nan, -0.5}, 3},
		{[]float64{nan, nan, nan}, 0},
	} {
		var cells []Cell
		for i, g := range c.gaps {
			cells = append(cells, cell(i+1, g))
		}
		w := within(cells, 1)
		require.Equal(t, c.epochs, w.Epochs, "%v", c.gaps)
		require.Equal(t, 10*c.epochs, w.AsyncSteps, "%v", c.gaps)
	}
}

func TestMeanStd(t *testing.T) {
	m, s := meanStd([]float64{0.8, 0.84, 0.82})
	require.InDelta(t, 0.82, m, 1e-12)
	require.InDelta(t, 0.02, s, 1e-12, "the sample standard deviation (n − 1)")
	m, s = meanStd([]float64{0.8})
	require.Equal(t, 0.8, m)
	require.Zero(t, s)
	m, s = meanStd(nil)
	require.Zero(t, m+s)
}
