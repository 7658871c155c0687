package experiment

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"time"

	stderrors "errors"

	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"

	"github.com/pkg/errors"
)

// Sweep trains the runs of a grid that its cache does not hold, and
// summarises all of them.
type Sweep struct {
	Grid
	// Recipe is the model's (zoo.RecipeFor(Grid.Model)); TrainData and
	// TestData are its data as Grid.Data names it.
	Recipe              zoo.Recipe
	TrainData, TestData zoo.Data
	// Cache holds the finished runs (Dir "": Out/runs). Work holds the
	// checkpoints of the runs under way (a run's are removed once it is
	// recorded; nothing there needs keeping; "": Out/checkpoints). Out is
	// where the summary goes (WriteReport; "": nowhere).
	Cache     Cache
	Work, Out string
	// Jobs is how many runs train at a time (at least 1).
	Jobs int
	// Trainer trains a run (nil: train.Train).
	Trainer Trainer
	// Log, when set, hears of each run that finishes and of each resume.
	Log io.Writer

	mu sync.Mutex // guards Log, the records and the summary
}

func (s *Sweep) trainer() Trainer {
	if s.Trainer == nil {
		return train.Train
	}
	return s.Trainer
}

func (s *Sweep) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, format+"\n", args...)
	}
}

// Run trains the runs the cache does not hold, Jobs at a time, shorter
// lengths and lower seeds first, recording each in the cache as it
// finishes and rewriting the summary; it returns the summary of every
// finished run. A run that fails is left out, its checkpoints kept, and
// the failures are returned, joined, once the other runs trained. When ctx
// ends, the runs under way stop at once and Run returns: running it again
// goes on from the cache and their checkpoints. Run modifies the grid's
// Settings (Fill), resolves its lengths of 0 to the recipe's and sets
// the default Cache and Work.
func (s *Sweep) Run(ctx context.Context) (*Report, error) {
	if s.Cache.Dir == "" {
		s.Cache.Dir = filepath.Join(s.Out, "runs")
	}
	if s.Work == "" {
		s.Work = filepath.Join(s.Out, "checkpoints")
	}
	p, err := runout.StageCount(s.Recipe, s.Stages)
	if err != nil {
		return nil, err
	}
	if err := Fill(s.Settings, s.Recipe.Run, p); err != nil {
		return nil, err
	}
	for i, e := range s.Epochs {
		if e == 0 {
			s.Epochs[i] = s.Recipe.Run.Epochs
		}
	}
	runs := s.runs()
	plans, done, todo, err := s.look(runs, p)
	if err != nil {
		return nil, err
	}
	rep := s.newReport(p, plans)
	rep.summarise(runs, done)
	s.logf("sweep of %s (P=%d): %d variants × %d settings × %d lengths × %d seeds = %d runs, %d finished before, %d to train, %d at a time",
		s.Model, p, len(s.Methods), len(s.Settings), len(s.Epochs), len(s.Seeds), len(runs), len(runs)-len(todo), len(todo), max(s.Jobs, 1))
	if s.Out != "" {
		if err := CheckWritable(s.Out, Files); err != nil {
			return nil, errors.Wrapf(err, "sweep: %s", s.Out)
		}
	}
	failed := s.train(ctx, todo, plans, rep, runs, done)
	if err := s.write(rep); err != nil {
		failed = append(failed, err)
	}
	if ctx.Err() != nil {
		return rep, errors.Wrap(ctx.Err(), "sweep interrupted: run it again to go on from the runs it recorded and the checkpoints of those under way")
	}
	return rep, stderrors.Join(failed...)
}

// runs are the grid's runs in the order they train: by length, seed,
// setting, then variant.
func (s *Sweep) runs() []Run {
	var runs []Run
	for _, e := range s.Epochs {
		for _, seed := range s.Seeds {
			for _, set := range s.Settings {
				for _, v := range s.Methods {
					runs = append(runs, Run{Variant: v, Setting: set, Epochs: e, Seed: seed})
				}
			}
		}
	}
	return runs
}

// look plans every run and finds the finished ones in the cache.
func (s *Sweep) look(runs []Run, p int) (map[string]plan, map[string]*Record, []Run, error) {
	plans, done := map[string]plan{}, map[string]*Record{}
	var todo []Run
	for _, r := range runs {
		pl, err := s.plan(s.Recipe, r, p, s.TrainData.Len())
		if err != nil {
			return nil, nil, nil, err
		}
		plans[r.Key()] = pl
		rec, err := s.Cache.Load(r.Key(), Record{Spec: pl.spec, CheckpointEvery: s.CheckpointEvery})
		if err != nil {
			return nil, nil, nil, err
		}
		if rec != nil {
			done[r.Key()] = rec
		} else {
			todo = append(todo, r)
		}
	}
	return plans, done, todo, nil
}

// newReport is the summary's frame: the grid on p stages.
func (s *Sweep) newReport(p int, plans map[string]plan) *Report {
	rep := &Report{Model: s.Model, Data: s.Data, Stages: p, Baseline: s.baseline(), Tolerance: Tolerance,
		TargetAccuracy: s.Target, CheckpointEvery: s.CheckpointEvery, Settings: s.Settings,
		Epochs: slices.Clone(s.Epochs), Seeds: slices.Clone(s.Seeds)}
	for _, pl := range plans { // every setting keeps the recipe's minibatch
		rep.StepsPerEpoch = pl.epochSteps
		break
	}
	for _, v := range s.Methods {
		rep.Methods = append(rep.Methods, v.String())
	}
	return rep
}

// train trains todo, Jobs at a time, and returns the failures.
func (s *Sweep) train(ctx context.Context, todo []Run, plans map[string]plan, rep *Report, runs []Run, done map[string]*Record) []error {
	var failed []error
	finished, stepsDone, stepsLeft := 0, 0, 0
	for _, r := range todo {
		stepsLeft += plans[r.Key()].steps
	}
	began := time.Now()
	one := func(r Run) {
		pl := plans[r.Key()]
		rec, err := s.trainRun(ctx, r, pl)
		s.mu.Lock()
		defer s.mu.Unlock()
		finished++
		stepsDone, stepsLeft = stepsDone+pl.steps, stepsLeft-pl.steps
		if err == nil {
			err = s.Cache.Save(r.Key(), rec)
		}
		if err != nil {
			if ctx.Err() == nil {
				failed = append(failed, err)
				s.logf("[%d/%d] %v", finished, len(todo), err)
			}
			return
		}
		done[r.Key()] = rec
		rep.summarise(runs, done)
		if err := s.write(rep); err != nil {
			failed = append(failed, err)
		}
		left := time.Duration(float64(time.Since(began)) / float64(stepsDone) * float64(stepsLeft))
		s.logf("[%d/%d] %s: %s; about %v left", finished, len(todo), r.Key(), outcome(rec, rep), left.Round(time.Minute))
	}
	queue := make(chan Run)
	var wg sync.WaitGroup
	for range max(s.Jobs, 1) {
		wg.Go(func() {
			for r := range queue {
				one(r)
			}
		})
	}
	for _, r := range todo {
		if ctx.Err() != nil {
			break
		}
		queue <- r
	}
	close(queue)
	wg.Wait()
	return failed
}

// write writes the summary into Out, if any.
func (s *Sweep) write(rep *Report) error {
	if s.Out == "" {
		return nil
	}
	return WriteReport(s.Out, rep)
}

// outcome is a finished run in a few words, its gap when its cell has one.
func outcome(r *Record, rep *Report) string {
	switch {
	case r.Refused != "":
		return "cannot run: " + r.Refused
	case r.Diverged != "":
		return "diverged"
	}
	s := fmt.Sprintf("accuracy %.4f", r.Accuracy)
	for _, c := range rep.Cells {
		if c.Method == r.Method && c.Setting == r.Setting && c.Epochs == r.Epochs && c.Gap != nil {
			for i, seed := range c.Gap.Seeds {
				if seed == r.Seed {
					s += fmt.Sprintf(" (%+.2f points)", c.Gap.Points[i])
				}
			}
		}
	}
	return s + fmt.Sprintf(", %v of training", r.TrainTime.Round(time.Second))
}
