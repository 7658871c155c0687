package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
)

// TimeToAccuracy is what pipemare bench -target measures: how long a
// training takes to reach a test accuracy, per placement, over several
// seeds — bench.json. The clock is each epoch's (train.EpochResult.Clock):
// from the start of the first epoch to the end of an epoch's evaluation,
// running through training and every evaluation before it, as MLPerf
// times a run; the accuracy is measured after every epoch, a fixed
// interval of samples.
type TimeToAccuracy struct {
	Target float64     `json:"target"`
	Runs   []TargetRun `json:"runs"`
	// Placements summarise the runs of each placement, in the order
	// trained.
	Placements []TargetSummary `json:"placements"`
	// SameWeights says whether each seed trained the same weights in
	// every placement, as it must: placement changes timing, never
	// results.
	SameWeights bool `json:"same_weights"`
}

// TargetRun is one training of a TimeToAccuracy.
type TargetRun struct {
	Placement string `json:"placement"`
	Seed      int64  `json:"seed"`
	// Reached says whether an epoch's test accuracy reached the target;
	// EpochsToTarget is the first such epoch (from 1) and
	// SecondsToTarget its clock.
	Reached         bool    `json:"reached"`
	EpochsToTarget  int     `json:"epochs_to_target,omitempty"`
	SecondsToTarget float64 `json:"seconds_to_target,omitempty"`
	// SamplesPerSec is the run's training samples over the time the
	// pipeline trained (evaluation left out).
	SamplesPerSec float64 `json:"samples_per_sec"`
	// Accuracies and Clocks are each epoch's test accuracy and clock in
	// seconds.
	Accuracies    []float64 `json:"accuracies"`
	Clocks        []float64 `json:"clocks_s"`
	WeightsSHA256 string    `json:"weights_sha256"`
	Dir           string    `json:"dir"`
}

// TargetSummary is one placement's runs: how many reached the target, the
// median time and epochs to it over those that did (with the range of the
// times), and the median samples/s over all (with their range).
type TargetSummary struct {
	Placement        string  `json:"placement"`
	Runs             int     `json:"runs"`
	Reached          int     `json:"reached"`
	SecondsToTarget  float64 `json:"seconds_to_target"`
	SecondsMin       float64 `json:"seconds_min"`
	SecondsMax       float64 `json:"seconds_max"`
	EpochsToTarget   float64 `json:"epochs_to_target"`
	SamplesPerSec    float64 `json:"samples_per_sec"`
	SamplesPerSecMin float64 `json:"samples_per_sec_min"`
	SamplesPerSecMax float64 `json:"samples_per_sec_max"`
}

// TargetPlacement is where a training of a TimeToAccuracy runs: its name
// and how it is placed — in one process on the CPUs CPUs ("": every CPU
// of the process), or in Procs stage processes on this host, each pinned
// to a CPU of its own when Pin is set.
type TargetPlacement struct {
	Name  string
	CPUs  string
	Procs int
	Pin   bool
}

// TargetPlacementNames are the placements pipemare bench -target knows:
// one process on one CPU, one process on every CPU, and a process per
// stage, each pinned to a CPU of its own.
var TargetPlacementNames = []string{"one-cpu", "cores", "procs"}

// TargetPlacements returns the placements named in names (of
// TargetPlacementNames) of a training cut into stages stages: one-cpu runs
// on the CPU oneCPU, cores on every CPU of the process, procs runs stages
// stage processes on this host, each pinned. Errors are *runspec.Error
// about the placements setting.
func TargetPlacements(names []string, stages int, oneCPU string) ([]TargetPlacement, error) {
	var out []TargetPlacement
	for _, n := range names {
		p := TargetPlacement{Name: n}
		switch n {
		case "one-cpu":
			p.CPUs = oneCPU
		case "cores":
		case "procs":
			if stages < 2 {
				return nil, &runspec.Error{Setting: "placements", Value: n, Reason: fmt.Sprintf("a process per stage needs a cut into stages ({stages} 2 or more, or {cut}; here %d), or leave procs out", stages)}
			}
			p.Procs, p.Pin = stages, true
		default:
			return nil, &runspec.Error{Setting: "placements", Value: strconv.Quote(n), Reason: "not one of " + strings.Join(TargetPlacementNames, ", ")}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, &runspec.Error{Setting: "placements", Reason: "no placement: name one or more of " + strings.Join(TargetPlacementNames, ", ")}
	}
	return out, nil
}

// Run trains every seed in every placement, the placements' order
// reversed from one seed to the next (A B C, C B A, …) so that a drift of
// the machine falls on all of them, each by calling train (a child
// pipemare train: RunTargetChildren), which returns the run's report.json
// and directory. It logs each run to log and fills t's runs and
// summaries; it stops at the first failure, naming the run.
func (t *TimeToAccuracy) Run(ctx context.Context, seeds []int64, placements []TargetPlacement, train func(ctx context.Context, p TargetPlacement, seed int64) (report []byte, dir string, err error), log io.Writer) error {
	for i, seed := range seeds {
		order := slices.Clone(placements)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, p := range order {
			raw, dir, err := train(ctx, p, seed)
			if err != nil {
				return errors.Wrapf(err, "%s, seed %d", p.Name, seed)
			}
			r, err := t.parse(raw)
			if err != nil {
				return errors.Wrapf(err, "%s, seed %d: %s", p.Name, seed, filepath.Join(dir, "report.json"))
			}
			r.Placement, r.Seed, r.Dir = p.Name, seed, dir
			t.Runs = append(t.Runs, r)
			fmt.Fprintf(log, "  %-8s seed %-3d %s  %8.1f samples/s\n", p.Name, seed, r.outcome(t.Target), r.SamplesPerSec)
		}
	}
	t.summarise(placements)
	return nil
}

// RunTargetChildren runs t (Run) as child trainings of exe ("": this
// program; TrainChild), the training of seed in placement p with the
// arguments args(p, seed) gives, each writing its run directory into dir
// as <placement>-seed<seed>.
func (t *TimeToAccuracy) RunTargetChildren(ctx context.Context, exe string, args func(p TargetPlacement, seed int64) ChildArgs, dir string, seeds []int64, placements []TargetPlacement, log io.Writer) error {
	return t.Run(ctx, seeds, placements, func(ctx context.Context, p TargetPlacement, seed int64) ([]byte, string, error) {
		out := filepath.Join(dir, fmt.Sprintf("%s-seed%d", p.Name, seed))
		_, raw, err := TrainChild(ctx, exe, args(p, seed)(out), out)
		return raw, out, err
	}, log)
}

// parse reads a run's report.json: its epochs' accuracies and clocks, its
// samples/s and weights, and when it first reached t's target
// (runout.FirstAtTarget, as sweeps and comparisons time it).
func (t *TimeToAccuracy) parse(raw []byte) (TargetRun, error) {
	var rep struct {
		Result struct {
			WeightsSHA256 string              `json:"weights_sha256"`
			Epochs        []train.EpochResult `json:"epochs"`
			Report        struct {
				SamplesPerSec float64 `json:"samples_per_sec"`
			} `json:"report"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		return TargetRun{}, err
	}
	res := rep.Result
	r := TargetRun{SamplesPerSec: res.Report.SamplesPerSec, WeightsSHA256: res.WeightsSHA256}
	for i, e := range res.Epochs {
		if e.Interrupted {
			break
		}
		if e.Clock <= 0 {
			return TargetRun{}, errors.Errorf("epoch %d has no clock_ns: a report of an older pipemare", i+1)
		}
		r.Accuracies, r.Clocks = append(r.Accuracies, e.Accuracy), append(r.Clocks, e.Clock.Seconds())
	}
	if at := runout.FirstAtTarget(res.Epochs, t.Target); at >= 0 && at < len(r.Clocks) {
		r.Reached, r.EpochsToTarget, r.SecondsToTarget = true, at+1, r.Clocks[at]
	}
	return r, nil
}

// outcome says in a few words when r reached target, or that it did not.
func (r TargetRun) outcome(target float64) string {
	if !r.Reached {
		last := 0.0
		if len(r.Accuracies) > 0 {
			last = r.Accuracies[len(r.Accuracies)-1]
		}
		return fmt.Sprintf("did not reach %.4f (last epoch %.4f)", target, last)
	}
	return fmt.Sprintf("%.4f in %7.2f s, epoch %d", r.Accuracies[r.EpochsToTarget-1], r.SecondsToTarget, r.EpochsToTarget)
}

// summarise fills t's summaries, one per placement, and SameWeights.
func (t *TimeToAccuracy) summarise(placements []TargetPlacement) {
	t.Placements = nil
	t.SameWeights = true
	weights := map[int64]string{}
	for _, r := range t.Runs {
		if w, ok := weights[r.Seed]; ok && w != r.WeightsSHA256 {
			t.SameWeights = false
		}
		weights[r.Seed] = r.WeightsSHA256
	}
	for _, p := range placements {
		s := TargetSummary{Placement: p.Name}
		var secs, epochs, rates []float64
		for _, r := range t.Runs {
			if r.Placement != p.Name {
				continue
			}
			s.Runs++
			rates = append(rates, r.SamplesPerSec)
			if r.Reached {
				s.Reached++
				secs, epochs = append(secs, r.SecondsToTarget), append(epochs, float64(r.EpochsToTarget))
			}
		}
		s.SecondsToTarget, s.EpochsToTarget, s.SamplesPerSec = median(secs), median(epochs), median(rates)
		if len(secs) > 0 {
			s.SecondsMin, s.SecondsMax = slices.Min(secs), slices.Max(secs)
		}
		if len(rates) > 0 {
			s.SamplesPerSecMin, s.SamplesPerSecMax = slices.Min(rates), slices.Max(rates)
		}
		t.Placements = append(t.Placements, s)
	}
}

// Table writes t's summaries as a Markdown table: per placement, the runs
// that reached the target, the median time to it with its range, the
// median epochs to it and the median samples/s with their range.
func (t *TimeToAccuracy) Table(w io.Writer) {
	fmt.Fprintf(w, "| placement | reached %.4f | time to target, s | epochs | samples/s |\n", t.Target)
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, s := range t.Placements {
		time, epochs := "—", "—"
		if s.Reached > 0 {
			time = fmt.Sprintf("%.2f (%.2f–%.2f)", s.SecondsToTarget, s.SecondsMin, s.SecondsMax)
			epochs = fmt.Sprintf("%g", s.EpochsToTarget)
		}
		fmt.Fprintf(w, "| %s | %d of %d | %s | %s | %.0f (%.0f–%.0f) |\n", s.Placement, s.Reached, s.Runs, time, epochs, s.SamplesPerSec, s.SamplesPerSecMin, s.SamplesPerSecMax)
	}
}

// Write says on log what t measured (Table) and writes out's bench.json
// (t). A seed that trained different weights in two placements is an
// error once everything is written: a placement changes timing, never
// results.
func (t *TimeToAccuracy) Write(out rundir.Dir, log io.Writer) error {
	t.Table(log)
	if err := out.WriteJSON("bench.json", t); err != nil {
		return err
	}
	if !t.SameWeights {
		return errors.New("a seed trained different weights in different placements: the placement changed the arithmetic (a bug)")
	}
	return nil
}
