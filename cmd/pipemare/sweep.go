package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipemare/pipemare/delay"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/zoo"
)

// delaySetting is one column of a sweep: N microbatches at the recipe's
// minibatch (the pipeline's own delays), or delays injected into the
// recipe's run.
type delaySetting struct {
	// Label names the column: "N=4", "fixed:8", "exp:4".
	Label string `json:"label"`
	// Microbatches and MicrobatchRows are N and the rows of a microbatch.
	Microbatches   int `json:"microbatches"`
	MicrobatchRows int `json:"microbatch_rows"`
	// Injected is "fixed:D" (every stage's forwards read weights D updates
	// old) or "exp:μ" (a truncated exponential of mean μ, at most 4μ, drawn
	// per stage and step); empty for a pipeline's own delays.
	Injected string `json:"injected,omitempty"`
	// Tau0 is the first stage's delay (the largest): τ_0 =
	// ceil((2P−1)/N) for a pipeline, D or μ for injected delays.
	Tau0 float64 `json:"tau0"`
}

// source is the injected delay source for p stages (nil for none).
func (d delaySetting) source(p int) delay.Source {
	kind, v, _ := strings.Cut(d.Injected, ":")
	x, _ := strconv.ParseFloat(v, 64) // parseSettings made sure
	switch kind {
	case "fixed":
		f := make(delay.Fixed, p)
		for i := range f {
			f[i] = int(x)
		}
		return f
	case "exp":
		return delay.Exponential{MeanDelay: x, Limit: int(math.Ceil(4 * x)), Seed: 1, N: d.Microbatches}
	}
	return nil
}

// sweepRun is one training of a sweep, as runs/<key>.json holds it.
type sweepRun struct {
	Method  string `json:"method"`
	Setting string `json:"setting"`
	Seed    int64  `json:"seed"`
	// Args are pipemare train's flags for the same run (with injected
	// delays, which train has no flag for, the setting says which): a
	// finished run is reused only when they are the same.
	Args []string `json:"args"`
	// Refused says why the method cannot run at this setting; Diverged
	// that its loss stopped being finite (the error). Either way there is
	// no accuracy.
	Refused  string `json:"refused,omitempty"`
	Diverged string `json:"diverged,omitempty"`
	// Accuracy is the final test accuracy, Epochs the test accuracy after
	// each epoch; TimeToTarget the training time until the first epoch at
	// -target (absent: never); Wall the run's time.
	Accuracy     float64       `json:"final_accuracy,omitempty"`
	Epochs       []float64     `json:"epoch_accuracy,omitempty"`
	TimeToTarget time.Duration `json:"time_to_target_ns,omitempty"`
	Wall         time.Duration `json:"wall_ns,omitempty"`
	// Report is the run's report.json as train writes it.
	Report *runReport `json:"report,omitempty"`
}

// key is the run's file name in runs/, without .json.
func (r sweepRun) key() string {
	s := strings.NewReplacer("=", "", ":", "", ".", "_").Replace(r.Setting)
	return fmt.Sprintf("%s-%s-seed%d", r.Method, s, r.Seed)
}

// sweepCell is one method at one setting over the seeds.
type sweepCell struct {
	Method  string `json:"method"`
	Setting string `json:"setting"`
	// Accuracies are the final accuracies of the seeds that finished
	// (Seeds in the same order); Mean and Std (the sample standard
	// deviation, 0 for one seed) summarise them.
	Seeds      []int64   `json:"seeds"`
	Accuracies []float64 `json:"accuracies"`
	Mean       float64   `json:"mean"`
	Std        float64   `json:"std"`
	// EpochMean and EpochStd are the test accuracy after each epoch, mean
	// and sample standard deviation over the same seeds.
	EpochMean []float64 `json:"epoch_mean,omitempty"`
	EpochStd  []float64 `json:"epoch_std,omitempty"`
	// Diverged counts the seeds whose loss stopped being finite; Refused
	// says why the method cannot run here.
	Diverged int    `json:"diverged,omitempty"`
	Refused  string `json:"refused,omitempty"`
	// Reached counts the seeds that reached the target accuracy;
	// TimeToTarget is their mean training time to it.
	Reached      int           `json:"reached"`
	TimeToTarget time.Duration `json:"time_to_target_ns,omitempty"`
}

// sweepReport is sweep.json.
type sweepReport struct {
	Model          string         `json:"model"`
	Stages         int            `json:"stages"`
	Epochs         int            `json:"epochs"`
	TargetAccuracy float64        `json:"target_accuracy"`
	Methods        []string       `json:"methods"`
	Settings       []delaySetting `json:"settings"`
	Seeds          []int64        `json:"seeds"`
	Cells          []sweepCell    `json:"cells"`
}

// sweepFlags are sweep's own flags.
type sweepFlags struct {
	model, data, methods, microbatches, delays, seeds, stages, out string
	epochs, limit, jobs                                            int
	target                                                         float64
}

func sweepCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare sweep", flag.ContinueOnError)
	var f sweepFlags
	fs.StringVar(&f.model, "model", "resnet", "model: mlp, cnn, resnet or transformer")
	fs.StringVar(&f.data, "data", "embedded", "data, as for train")
	fs.StringVar(&f.methods, "methods", methodNames(), "methods to compare, comma-separated")
	fs.StringVar(&f.microbatches, "microbatches", "16,8,4,2", "values of N, comma-separated, each at the recipe's minibatch (N × rows); empty for none")
	fs.StringVar(&f.delays, "delays", "", "injected delays at the recipe's N, comma-separated: fixed:D (every stage D updates late) or exp:μ (truncated exponential of mean μ); the methods' warm-ups are off, as the delays start at the first step")
	fs.StringVar(&f.seeds, "seeds", "1,2,3", "seeds, comma-separated")
	fs.StringVar(&f.stages, "stages", "fine", "number of stages, or fine for one per layer")
	fs.IntVar(&f.epochs, "epochs", 0, "epochs (0: the model's recipe)")
	fs.IntVar(&f.limit, "limit", 0, "use only the first n training examples (0: all)")
	fs.IntVar(&f.jobs, "jobs", 1, "trainings at a time")
	fs.Float64Var(&f.target, "target", 0.8, "test accuracy to time")
	fs.StringVar(&f.out, "out", "out/sweep", "output directory: sweep.md, sweep.json, sweep.svg and runs/, a JSON per finished run (a rerun reuses them)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	methods, settings, seeds, err := f.parse()
	if err != nil {
		return usageError(fs, "%v", err)
	}
	r, err := zoo.RecipeFor(f.model)
	if err != nil {
		return usageError(fs, "-model %q: %v", f.model, err)
	}
	if err := settings.fill(r.Run); err != nil {
		return usageError(fs, "%v", err)
	}
	var o options // train's flags, to check them before anything trains
	o.register(flag.NewFlagSet("", flag.ContinueOnError))
	o.model, o.data, o.stages, o.limit, o.epochs = f.model, f.data, f.stages, f.limit, f.epochs
	if err := o.check(); err != nil {
		return usageError(fs, "%v", err)
	}
	_, train, test, err := o.load()
	if err != nil {
		return err
	}
	p, err := stageCount(r, f.stages)
	if err != nil {
		return err
	}
	for i := range settings {
		s := &settings[i]
		if s.Injected == "" {
			s.Tau0 = float64(schedule.Delay(p, s.Microbatches, 0))
		}
	}
	out := outputs{dir: f.out, files: []string{"sweep.md", "sweep.json", "sweep.svg"}}
	if err := out.prepare(); err != nil {
		return err
	}
	runsDir := outputs{dir: filepath.Join(f.out, "runs")}
	if err := runsDir.prepare(); err != nil {
		return err
	}
	report := sweepReport{Model: f.model, Stages: p, Epochs: r.Run.Epochs, TargetAccuracy: f.target, Settings: settings, Seeds: seeds}
	if f.epochs > 0 {
		report.Epochs = f.epochs
	}
	for _, m := range methods {
		report.Methods = append(report.Methods, string(m))
	}

	// Every run, reused from runs/ when it finished before.
	var todo []*sweepRun
	var all []*sweepRun
	for _, s := range settings {
		for _, m := range methods {
			for _, seed := range seeds {
				run := &sweepRun{Method: string(m), Setting: s.Label, Seed: seed, Args: f.trainArgs(m, s, seed)}
				all = append(all, run)
				done, err := loadRun(runsDir, run)
				if err != nil {
					return err
				}
				if !done {
					todo = append(todo, run)
				}
			}
		}
	}
	fmt.Fprintf(stdout, "sweep of %s (P=%d): %d methods × %d settings × %d seeds = %d runs, %d finished before, %d to train, %d at a time\n",
		f.model, p, len(methods), len(settings), len(seeds), len(all), len(all)-len(todo), len(todo), f.jobs)

	var mu sync.Mutex // guards the runs' results, the outputs and the counts below
	finished, failed := 0, []error{}
	began := time.Now()
	write := func() error { return writeSweep(out, report, all) }
	train1 := func(run *sweepRun, s delaySetting) {
		err := trainSweepRun(ctx, run, s, p, f.target, train, test)
		mu.Lock()
		defer mu.Unlock()
		finished++
		if err != nil {
			failed = append(failed, fmt.Errorf("%s %s seed %d: %w", run.Method, run.Setting, run.Seed, err))
			fmt.Fprintf(stdout, "[%d/%d] %s %s seed %d: %v\n", finished, len(todo), run.Method, run.Setting, run.Seed, err)
			return
		}
		if err := runsDir.writeJSON(run.key()+".json", run); err != nil {
			failed = append(failed, err)
		}
		if err := write(); err != nil {
			failed = append(failed, err)
		}
		left := time.Duration(float64(time.Since(began)) / float64(finished) * float64(len(todo)-finished))
		fmt.Fprintf(stdout, "[%d/%d] %s %s seed %d: %s; about %v left\n", finished, len(todo), run.Method, run.Setting, run.Seed, run.outcome(), left.Round(time.Second))
	}
	bySetting := map[string]delaySetting{}
	for _, s := range settings {
		bySetting[s.Label] = s
	}
	queue := make(chan *sweepRun)
	var wg sync.WaitGroup
	for range max(f.jobs, 1) {
		wg.Go(func() {
			for run := range queue {
				train1(run, bySetting[run.Setting])
			}
		})
	}
	for _, run := range todo {
		if ctx.Err() != nil {
			break
		}
		queue <- run
	}
	close(queue)
	wg.Wait()
	if err := write(); err != nil {
		return err
	}
	md, err := os.ReadFile(filepath.Join(f.out, "sweep.md"))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\nwrote %s/sweep.md, sweep.json, sweep.svg and runs/ in %v\n", md, f.out, time.Since(began).Round(time.Second))
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: the same command goes on from the %d runs in %s/runs", len(all)-len(todo)+finished-len(failed), f.out)
	}
	return errors.Join(failed...)
}

// parse reads the list flags.
func (f sweepFlags) parse() ([]zoo.Method, settingList, []int64, error) {
	var methods []zoo.Method
	for _, name := range splitList(f.methods) {
		m, err := zoo.ParseMethod(name)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("-methods: %v", err)
		}
		methods = append(methods, m)
	}
	var settings settingList
	for _, v := range splitList(f.microbatches) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, nil, nil, fmt.Errorf("-microbatches %q: %q is not a positive number", f.microbatches, v)
		}
		settings = append(settings, delaySetting{Label: fmt.Sprintf("N=%d", n), Microbatches: n})
	}
	for _, v := range splitList(f.delays) {
		kind, x, _ := strings.Cut(v, ":")
		d, err := strconv.ParseFloat(x, 64)
		if (kind != "fixed" && kind != "exp") || err != nil || !(d > 0) || (kind == "fixed" && d != math.Trunc(d)) {
			return nil, nil, nil, fmt.Errorf("-delays %q: %q is neither fixed:D (D a positive integer) nor exp:μ (μ > 0)", f.delays, v)
		}
		settings = append(settings, delaySetting{Label: v, Injected: v, Tau0: d})
	}
	var seeds []int64
	for _, v := range splitList(f.seeds) {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("-seeds %q: %q is not a number", f.seeds, v)
		}
		seeds = append(seeds, s)
	}
	switch {
	case len(methods) == 0:
		return nil, nil, nil, errors.New("-methods: no method")
	case len(settings) == 0:
		return nil, nil, nil, errors.New("-microbatches and -delays: no setting")
	case len(seeds) == 0:
		return nil, nil, nil, errors.New("-seeds: no seed")
	}
	return methods, settings, seeds, nil
}

// settingList is a sweep's columns.
type settingList []delaySetting

// fill sets each setting's N and rows from the recipe's run: N × rows is
// the recipe's minibatch, which each N must divide.
func (l settingList) fill(run zoo.Config) error {
	batch := run.Microbatch * run.Microbatches
	for i := range l {
		s := &l[i]
		if s.Injected != "" {
			s.Microbatches, s.MicrobatchRows = run.Microbatches, run.Microbatch
			continue
		}
		if batch%s.Microbatches != 0 {
			return fmt.Errorf("-microbatches: N=%d does not divide the recipe's minibatch of %d rows (%d × %d)", s.Microbatches, batch, run.Microbatches, run.Microbatch)
		}
		s.MicrobatchRows = batch / s.Microbatches
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// trainArgs are pipemare train's flags for one run of the sweep.
func (f sweepFlags) trainArgs(m zoo.Method, s delaySetting, seed int64) []string {
	args := []string{"-model", f.model, "-data", f.data, "-method", string(m), "-stages", f.stages,
		"-microbatches", strconv.Itoa(s.Microbatches), "-microbatch", strconv.Itoa(s.MicrobatchRows), "-seed", strconv.FormatInt(seed, 10)}
	if f.epochs > 0 {
		args = append(args, "-epochs", strconv.Itoa(f.epochs))
	}
	if f.limit > 0 {
		args = append(args, "-limit", strconv.Itoa(f.limit))
	}
	if s.Injected != "" {
		args = append(args, "-warmup", "0")
	}
	return args
}

// loadRun fills run from runs/<key>.json when that run finished before
// with the same flags; a file from other flags is an error (another
// sweep's directory).
func loadRun(dir outputs, run *sweepRun) (bool, error) {
	path := filepath.Join(dir.dir, run.key()+".json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var saved sweepRun
	if err := json.Unmarshal(b, &saved); err != nil {
		return false, fmt.Errorf("%s: %w (delete it to train the run again)", path, err)
	}
	if strings.Join(saved.Args, " ") != strings.Join(run.Args, " ") {
		return false, fmt.Errorf("%s is a run of other flags (%s, not %s): give another -out, or delete it", path, strings.Join(saved.Args, " "), strings.Join(run.Args, " "))
	}
	*run = saved
	return true, nil
}

// diverged matches the errors of a run whose loss stopped being finite.
var diverged = regexp.MustCompile(`not finite|the loss is`)

// trainSweepRun trains one run (or records why it cannot run, or that it
// diverged). Any other error is returned, and the run is not recorded.
func trainSweepRun(ctx context.Context, run *sweepRun, s delaySetting, p int, target float64, train, test zoo.Data) error {
	var o options
	fs := flag.NewFlagSet("pipemare train", flag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(run.Args); err != nil {
		return err
	}
	r, err := zoo.RecipeFor(o.model)
	if err != nil {
		return err
	}
	cfg, err := o.config(schedule.Schedule{}, train.Len())
	if err != nil {
		run.Refused = err.Error()
		return nil
	}
	if s.Injected != "" {
		if cfg.Schedule.Name != schedule.PipeMare.Name {
			run.Refused = fmt.Sprintf("injected delays stand for PipeMare's pipeline, and %s runs %s", run.Method, cfg.Schedule.Name)
			return nil
		}
		cfg.Delays = s.source(p)
	}
	if min := schedule.MinN(cfg.Schedule, p); cfg.Microbatches < min {
		run.Refused = fmt.Sprintf("%s needs N ≥ %d on %d stages", cfg.Schedule.Name, min, p)
		return nil
	}
	res, err := zoo.Train(ctx, r.Build, train, test, cfg)
	if err != nil && ctx.Err() == nil && diverged.MatchString(err.Error()) {
		run.Diverged = err.Error()
		return nil
	}
	if err != nil {
		return err
	}
	run.Accuracy, run.Wall = res.Accuracy, res.Wall
	for _, e := range res.Epochs {
		run.Epochs = append(run.Epochs, e.Accuracy)
	}
	run.TimeToTarget = timeToTarget(res, target)
	run.Report = &runReport{Settings: newSettings(&o, cfg, train, test), Result: res}
	return nil
}

// timeToTarget is a run's training time (evaluation excluded) until the
// first epoch whose test accuracy reached target, 0 when none did.
func timeToTarget(res *zoo.Result, target float64) time.Duration {
	elapsed := time.Duration(0)
	for _, e := range res.Epochs {
		elapsed += e.Wall
		if !e.Interrupted && e.Accuracy >= target {
			return elapsed
		}
	}
	return 0
}

// outcome is a finished run in a few words.
func (r *sweepRun) outcome() string {
	switch {
	case r.Refused != "":
		return "cannot run: " + r.Refused
	case r.Diverged != "":
		return "diverged"
	}
	return fmt.Sprintf("accuracy %.4f in %v", r.Accuracy, r.Wall.Round(time.Second))
}

// cells summarises the finished runs by method and setting.
func (rep *sweepReport) cells(runs []*sweepRun) {
	rep.Cells = nil
	for _, s := range rep.Settings {
		for _, m := range rep.Methods {
			c := sweepCell{Method: m, Setting: s.Label}
			var tta time.Duration
			for _, r := range runs {
				if r.Method != m || r.Setting != s.Label || (r.Report == nil && r.Refused == "" && r.Diverged == "") {
					continue
				}
				switch {
				case r.Refused != "":
					c.Refused = r.Refused
				case r.Diverged != "":
					c.Diverged++
				default:
					c.Seeds, c.Accuracies = append(c.Seeds, r.Seed), append(c.Accuracies, r.Accuracy)
					if r.TimeToTarget > 0 {
						c.Reached++
						tta += r.TimeToTarget
					}
				}
			}
			c.Mean, c.Std = meanStd(c.Accuracies)
			c.EpochMean, c.EpochStd = epochMeanStd(runs, c)
			if c.Reached > 0 {
				c.TimeToTarget = tta / time.Duration(c.Reached)
			}
			rep.Cells = append(rep.Cells, c)
		}
	}
}

// epochMeanStd is the mean and sample standard deviation of the test
// accuracy after each epoch over the runs of c's seeds (nil when they did
// not all train the same number of epochs).
func epochMeanStd(runs []*sweepRun, c sweepCell) (mean, std []float64) {
	var curves [][]float64
	for _, r := range runs {
		if r.Method == c.Method && r.Setting == c.Setting && slices.Contains(c.Seeds, r.Seed) && r.Refused == "" && r.Diverged == "" {
			if len(curves) > 0 && len(r.Epochs) != len(curves[0]) {
				return nil, nil
			}
			curves = append(curves, r.Epochs)
		}
	}
	if len(curves) == 0 {
		return nil, nil
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

// writeSweep writes sweep.json, sweep.md and sweep.svg from the runs that
// finished so far.
func writeSweep(out outputs, rep sweepReport, runs []*sweepRun) error {
	rep.cells(runs)
	if err := out.writeJSON("sweep.json", rep); err != nil {
		return err
	}
	if err := out.write("sweep.md", func(f *os.File) error { _, err := io.WriteString(f, rep.markdown()); return err }); err != nil {
		return err
	}
	return sweepPlot(filepath.Join(out.dir, "sweep.svg"), rep)
}

// markdown is the sweep's table: a row per method, a column per setting,
// the final accuracy's mean ± std over the seeds, then the time to the
// target.
func (rep sweepReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d stages, %d epochs; final test accuracy, mean ± std over seeds (n = seeds that finished); time to %.2f: mean training time of the seeds that reached it (k/n reached)\n\n", rep.Model, rep.Stages, rep.Epochs, rep.TargetAccuracy)
	b.WriteString("| method |")
	for _, s := range rep.Settings {
		fmt.Fprintf(&b, " %s (τ₀ = %g) |", s.Label, s.Tau0)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(rep.Settings)))
	b.WriteString("\n")
	rows := func(cell func(sweepCell) string) {
		for i, m := range rep.Methods {
			fmt.Fprintf(&b, "| %s |", m)
			for j := range rep.Settings {
				fmt.Fprintf(&b, " %s |", cell(rep.Cells[j*len(rep.Methods)+i]))
			}
			b.WriteString("\n")
		}
	}
	rows(func(c sweepCell) string {
		switch {
		case c.Refused != "":
			return "n/a"
		case len(c.Accuracies) == 0 && c.Diverged == 0:
			return "…"
		}
		s := "—"
		if len(c.Accuracies) > 0 {
			s = fmt.Sprintf("%.4f ± %.4f (%d)", c.Mean, c.Std, len(c.Accuracies))
		}
		if c.Diverged > 0 {
			s += fmt.Sprintf(", %d diverged", c.Diverged)
		}
		return s
	})
	fmt.Fprintf(&b, "\ntime to %.2f:\n\n| method |", rep.TargetAccuracy)
	for _, s := range rep.Settings {
		fmt.Fprintf(&b, " %s |", s.Label)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(rep.Settings)))
	b.WriteString("\n")
	rows(func(c sweepCell) string {
		n := len(c.Accuracies) + c.Diverged
		switch {
		case c.Refused != "":
			return "n/a"
		case n == 0:
			return "…"
		case c.Reached == 0:
			return fmt.Sprintf("— (0/%d)", n)
		}
		return fmt.Sprintf("%v (%d/%d)", c.TimeToTarget.Round(100*time.Millisecond), c.Reached, n)
	})
	var notes []string
	seen := map[string]bool{}
	for _, c := range rep.Cells {
		if c.Refused != "" && !seen[c.Method+c.Refused] {
			seen[c.Method+c.Refused] = true
			notes = append(notes, fmt.Sprintf("- n/a, %s at %s: %s", c.Method, c.Setting, c.Refused))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}
