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
// elsewhere (pipemare bench: a placement against one process on one CPU,
// or on every CPU), measured over interleaved rounds: bench.json.
// Samples/s are over the time the pipeline trained (evaluation left out);
// the speed-up is the median, over the rounds, of each round's placed ÷
// other samples/s.
type Bench struct {
	Placed  string `json:"placed"`
	Against string `json:"against"`
	// AgainstKind is the kind of the other runs (BenchRun.Kind, and their
	// directories' prefix): "one-cpu" (the default when empty) or
	// "cores".
	AgainstKind          string     `json:"against_kind"`
	Runs                 []BenchRun `json:"runs"`
	PlacedSamplesPerSec  float64    `json:"placed_samples_per_sec"`
	AgainstSamplesPerSec float64    `json:"against_samples_per_sec"`
	Speedup              float64    `json:"speedup"`
	SpeedupMin           float64    `json:"speedup_min"`
	SpeedupMax           float64    `json:"speedup_max"`
	// SameWeights says whether every run trained the same weights, as
	// they must: placement changes timing, never results.
	SameWeights bool `json:"same_weights"`
	// ProbeSpread is the slowest Probe before or after a run over the
	// fastest: 1 on a machine whose speed held (see probeMoved).
	ProbeSpread float64 `json:"probe_spread"`
	// SteadyRounds counts the rounds whose runs the machine's speed held
	// around: every Probe before and after their two runs within
	// probeMoved of the bench's fastest. SteadySpeedup is the median of
	// their speed-ups, with their range (0 when there is none): on a
	// machine whose speed moves, the figure to compare.
	SteadyRounds     int     `json:"steady_rounds"`
	SteadySpeedup    float64 `json:"steady_speedup"`
	SteadySpeedupMin float64 `json:"steady_speedup_min"`
	SteadySpeedupMax float64 `json:"steady_speedup_max"`

	probe func() time.Duration // Probe, unless a test sets it
}

// BenchRun is one training of a Bench.
type BenchRun struct {
	Kind          string  `json:"kind"` // "placed", or the Bench's AgainstKind
	Round         int     `json:"round"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	WeightsSHA256 string  `json:"weights_sha256"`
	Dir           string  `json:"dir"`
	// ProbeNs is how long Probe took just before this run, ProbeAfterNs
	// just after it.
	ProbeNs      int64 `json:"probe_ns"`
	ProbeAfterNs int64 `json:"probe_after_ns"`
}

// RunBench trains rounds rounds of the placed training and the other,
// in the order A B B A A B … so that a drift of the machine falls on both,
// each by calling train with its kind ("placed" or b.otherKind()) and round,
// timing Probe before and after it; it logs each run to log, and fills b's
// runs, medians, speed-up, the probes' spread and the steady rounds'
// speed-up. It stops at the first failure, naming the run.
func (b *Bench) RunBench(ctx context.Context, rounds int, train func(ctx context.Context, kind string, round int) (BenchRun, error), log io.Writer) error {
	probe := b.probe
	if probe == nil {
		probe = Probe
	}
	for k := 0; k < 2*rounds; k++ {
		kind := b.otherKind()
		if k%4 == 0 || k%4 == 3 { // A B B A
			kind = "placed"
		}
		took := probe()
		r, err := train(ctx, kind, k/2)
		if err != nil {
			return errors.Wrapf(err, "%s run %d", kind, k/2)
		}
		after := probe()
		r.Kind, r.Round, r.ProbeNs, r.ProbeAfterNs = kind, k/2, took.Nanoseconds(), after.Nanoseconds()
		b.Runs = append(b.Runs, r)
		fmt.Fprintf(log, "  round %d %-8s %8.1f samples/s (probes %.1f, %.1f ms)\n", r.Round, kind, r.SamplesPerSec, float64(took)/1e6, float64(after)/1e6)
	}
	b.summarise()
	return nil
}

// otherKind is the kind of b's other runs: AgainstKind, or "one-cpu".
func (b *Bench) otherKind() string {
	if b.AgainstKind == "" {
		return "one-cpu"
	}
	return b.AgainstKind
}

// summarise computes the medians and the speed-ups from the runs.
func (b *Bench) summarise() {
	var placed, against, ratios, probes []float64
	perRound := map[int][2]float64{}
	b.SameWeights = true
	for _, r := range b.Runs {
		for _, ns := range []int64{r.ProbeNs, r.ProbeAfterNs} {
			if ns > 0 {
				probes = append(probes, float64(ns))
			}
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
	fastest := 0.0
	if len(probes) > 0 {
		fastest = slices.Min(probes)
		b.ProbeSpread = slices.Max(probes) / fastest
	}
	var steady []float64
	for round, pr := range perRound {
		if pr[1] <= 0 {
			continue
		}
		ratios = append(ratios, pr[0]/pr[1])
		if fastest > 0 && b.held(round, fastest) {
			steady = append(steady, pr[0]/pr[1])
		}
	}
	b.PlacedSamplesPerSec, b.AgainstSamplesPerSec = median(placed), median(against)
	b.Speedup, b.SpeedupMin, b.SpeedupMax = spread(ratios)
	b.SteadyRounds = len(steady)
	b.SteadySpeedup, b.SteadySpeedupMin, b.SteadySpeedupMax = spread(steady)
}

// held reports whether every probe of round's runs is within probeMoved
// of fastest.
func (b *Bench) held(round int, fastest float64) bool {
	for _, r := range b.Runs {
		if r.Round == round && (float64(r.ProbeNs) > probeMoved*fastest || float64(r.ProbeAfterNs) > probeMoved*fastest) {
			return false
		}
	}
	return true
}

// spread is the median of x with its least and its most (0s for none).
func spread(x []float64) (med, lo, hi float64) {
	if len(x) == 0 {
		return 0, 0, 0
	}
	return median(x), slices.Min(x), slices.Max(x)
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
