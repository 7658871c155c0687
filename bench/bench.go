package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/pkg/errors"
)

// Bench is what a placement of a training buys against the same training
// elsewhere (pipemare bench: a placement against one process on one CPU),
// measured over interleaved rounds: bench.json. Samples/s are over the time
// the pipeline trained (evaluation left out); the speed-up is the median,
// over the rounds, of each round's placed ÷ other samples/s.
type Bench struct {
	Placed               string     `json:"placed"`
	Against              string     `json:"against"`
	Runs                 []BenchRun `json:"runs"`
	PlacedSamplesPerSec  float64    `json:"placed_samples_per_sec"`
	AgainstSamplesPerSec float64    `json:"against_samples_per_sec"`
	Speedup              float64    `json:"speedup"`
	SpeedupMin           float64    `json:"speedup_min"`
	SpeedupMax           float64    `json:"speedup_max"`
	// SameWeights says whether every run trained the same weights, as
	// they must: placement changes timing, never results.
	SameWeights bool `json:"same_weights"`
	// ProbeSpread is the slowest Probe before a run over the fastest: 1
	// on a machine whose speed held (see probeMoved).
	ProbeSpread float64 `json:"probe_spread"`

	probe func() time.Duration // Probe, unless a test sets it
}

// BenchRun is one training of a Bench.
type BenchRun struct {
	Kind          string  `json:"kind"` // "placed" or "one-cpu"
	Round         int     `json:"round"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	WeightsSHA256 string  `json:"weights_sha256"`
	Dir           string  `json:"dir"`
	// ProbeNs is how long Probe took just before this run.
	ProbeNs int64 `json:"probe_ns"`
}

// RunBench trains rounds rounds of the placed training and the other,
// in the order A B B A A B … so that a drift of the machine falls on both,
// each by calling train with its kind ("placed" or "one-cpu") and round,
// after timing Probe; it logs each run to log, and fills b's runs, medians,
// speed-up and the probes' spread. It stops at the first failure, naming
// the run.
func (b *Bench) RunBench(ctx context.Context, rounds int, train func(ctx context.Context, kind string, round int) (BenchRun, error), log io.Writer) error {
	probe := b.probe
	if probe == nil {
		probe = Probe
	}
	for k := 0; k < 2*rounds; k++ {
		kind := "one-cpu"
		if k%4 == 0 || k%4 == 3 { // A B B A
			kind = "placed"
		}
		took := probe()
		r, err := train(ctx, kind, k/2)
		if err != nil {
			return errors.Wrapf(err, "%s run %d", kind, k/2)
		}
		r.Kind, r.Round, r.ProbeNs = kind, k/2, took.Nanoseconds()
		b.Runs = append(b.Runs, r)
		fmt.Fprintf(log, "  round %d %-8s %8.1f samples/s (probe %.1f ms)\n", r.Round, kind, r.SamplesPerSec, float64(took)/1e6)
	}
	b.summarise()
	return nil
}

// summarise computes the medians and the speed-up from the runs.
func (b *Bench) summarise() {
	var placed, against, ratios, probes []float64
	perRound := map[int][2]float64{}
	b.SameWeights = true
	for _, r := range b.Runs {
		if r.ProbeNs > 0 {
			probes = append(probes, float64(r.ProbeNs))
		}
		pr := perRound[r.Round]
		if r.Kind == "placed" {
			placed, pr[0] = append(placed, r.SamplesPerSec), r.SamplesPerSec
		} else {
			against, pr[1] = append(against, r.SamplesPerSec), r.SamplesPerSec
		}
		perRound[r.Round] = pr
		b.SameWeights = b.SameWeights && r.WeightsSHA256 == b.Runs[0].WeightsSHA256
	}
	for _, pr := range perRound {
		if pr[1] > 0 {
			ratios = append(ratios, pr[0]/pr[1])
		}
	}
	b.PlacedSamplesPerSec, b.AgainstSamplesPerSec = median(placed), median(against)
	b.Speedup = median(ratios)
	if len(ratios) > 0 {
		b.SpeedupMin, b.SpeedupMax = slices.Min(ratios), slices.Max(ratios)
	}
	if len(probes) > 0 {
		b.ProbeSpread = slices.Max(probes) / slices.Min(probes)
	}
}

// median is the median of x (0 for none).
func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Clone(x)
	slices.Sort(x)
	if n := len(x); n%2 == 0 {
		return (x[n/2-1] + x[n/2]) / 2
	}
	return x[len(x)/2]
}
