package experiment

import (
	"math"
	"time"
)

// Cell is one variant at one setting and run length, over the seeds.
type Cell struct {
	Method  string `json:"method"`
	Setting string `json:"setting"`
	Epochs  int    `json:"epochs"`
	// Steps and AsyncSteps are a run's optimizer steps and those of them
	// asynchronous (Record), the same for every seed; 0 before any run of
	// the cell finished.
	Steps      int `json:"steps"`
	AsyncSteps int `json:"async_steps"`
	// Accuracies are the final accuracies (Record.Accuracy) of the seeds
	// that finished, Seeds in the same order; Mean and Std (the sample
	// standard deviation, 0 for one seed) summarise them.
	Seeds      []int64   `json:"seeds"`
	Accuracies []float64 `json:"accuracies"`
	Mean       float64   `json:"mean"`
	Std        float64   `json:"std"`
	// EpochMean and EpochStd are the test accuracy after each epoch, mean
	// and sample standard deviation over the same seeds.
	EpochMean []float64 `json:"epoch_mean,omitempty"`
	EpochStd  []float64 `json:"epoch_std,omitempty"`
	// Diverged counts the seeds whose loss stopped being finite; Refused
	// says why the variant cannot train here.
	Diverged int    `json:"diverged,omitempty"`
	Refused  string `json:"refused,omitempty"`
	// Reached counts the seeds that reached the grid's target accuracy;
	// TimeToTarget is their mean training time to it.
	Reached      int           `json:"reached"`
	TimeToTarget time.Duration `json:"time_to_target_ns,omitempty"`
	// Gap is the cell against the baseline at the same setting and length
	// (absent for the baseline itself and when no seed finished in both).
	Gap *Gap `json:"gap,omitempty"`
}

// Gap is a variant's accuracy minus the baseline's, in points (100 × the
// difference of accuracies), seed by seed: a seed starts both runs from
// the same weights and draws the same data order, so the difference of a
// seed measures the method, and the spread over seeds what remains.
type Gap struct {
	// Seeds are the seeds both finished, Points their gaps; Mean and Std
	// (sample standard deviation) summarise them.
	Seeds  []int64   `json:"seeds"`
	Points []float64 `json:"points"`
	Mean   float64   `json:"mean"`
	Std    float64   `json:"std"`
}

// Within is the run length from which a variant stays within a tolerance
// of the baseline at a setting: the shortest length measured from which on
// every longer length measured has a mean gap of at least −tolerance
// points. Epochs is 0 when none does (the last length is outside, or no
// gap was measured).
type Within struct {
	Method     string `json:"method"`
	Setting    string `json:"setting"`
	Epochs     int    `json:"epochs,omitempty"`
	AsyncSteps int    `json:"async_steps,omitempty"`
	// Measured are the lengths with a gap, in epochs.
	Measured []int `json:"measured_epochs"`
}

// newCell summarises the finished records of one cell.
func newCell(method, setting string, epochs int, records []*Record) Cell {
	c := Cell{Method: method, Setting: setting, Epochs: epochs}
	var tta time.Duration
	var curves [][]float64
	for _, r := range records {
		c.Steps, c.AsyncSteps = r.Steps, r.AsyncSteps
		switch {
		case r.Refused != "":
			c.Refused = r.Refused
		case r.Diverged != "":
			c.Diverged++
		default:
			c.Seeds, c.Accuracies = append(c.Seeds, r.Seed), append(c.Accuracies, r.Accuracy)
			curves = append(curves, r.EpochAccuracy)
			if r.TimeToTarget > 0 {
				c.Reached++
				tta += r.TimeToTarget
			}
		}
	}
	c.Mean, c.Std = meanStd(c.Accuracies)
	c.EpochMean, c.EpochStd = curveMeanStd(curves)
	if c.Reached > 0 {
		c.TimeToTarget = tta / time.Duration(c.Reached)
	}
	return c
}

// gap is c against the baseline cell base, seed by seed; nil when no seed
// finished in both.
func gap(c, base Cell) *Gap {
	acc := map[int64]float64{}
	for i, s := range base.Seeds {
		acc[s] = base.Accuracies[i]
	}
	g := &Gap{}
	for i, s := range c.Seeds {
		if b, ok := acc[s]; ok {
			g.Seeds, g.Points = append(g.Seeds, s), append(g.Points, 100*(c.Accuracies[i]-b))
		}
	}
	if len(g.Seeds) == 0 {
		return nil
	}
	g.Mean, g.Std = meanStd(g.Points)
	return g
}

// within finds, among one variant's cells at one setting in increasing
// length, the length from which it stays within tolerance points.
func within(cells []Cell, tolerance float64) Within {
	w := Within{Method: cells[0].Method, Setting: cells[0].Setting}
	for _, c := range cells {
		if c.Gap == nil {
			continue
		}
		w.Measured = append(w.Measured, c.Epochs)
		switch {
		case c.Gap.Mean < -tolerance:
			w.Epochs, w.AsyncSteps = 0, 0
		case w.Epochs == 0:
			w.Epochs, w.AsyncSteps = c.Epochs, c.AsyncSteps
		}
	}
	return w
}

// curveMeanStd is the mean and sample standard deviation of curves, point
// by point (nil when they do not all have the same length).
func curveMeanStd(curves [][]float64) (mean, std []float64) {
	if len(curves) == 0 {
		return nil, nil
	}
	for _, c := range curves {
		if len(c) != len(curves[0]) {
			return nil, nil
		}
	}
	for e := range curves[0] {
		var xs []float64
		for _, c := range curves {
			xs = append(xs, c[e])
		}
		m, s := meanStd(xs)
		mean, std = append(mean, m), append(std, s)
	}
	return mean, std
}

// meanStd is the mean and the sample standard deviation (0 for fewer than
// two values).
func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x / float64(len(xs))
	}
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)-1))
}
