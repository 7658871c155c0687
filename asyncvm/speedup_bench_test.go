//go:build unix

package asyncvm_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
	"gorgonia.org/gorgonia"
)

// BenchmarkInProcessSpeedup is what a second core buys the in-process
// engine: the zoo's MLP, CNN and ResNet cut into 2 stages balanced by time
// measured here on one thread (train.Balanced), PipeMare at the recipe's N, streaming
// speedupMinibatches minibatches of the embedded data per op, with
// GOMAXPROCS=1 and with GOMAXPROCS=2. Run the variants interleaved and
// compare samples/s (benchstat -col /procs):
//
//	go test -c -o asyncvm.test ./asyncvm/
//	for i in 1 2 3 4 5; do ./asyncvm.test -test.run '^$' -test.bench InProcessSpeedup -test.count 1; done > speedup.txt
//	benchstat -col /procs speedup.txt
//
// On a shared machine, other sessions' processes get an equal share of the
// CPUs whatever their nice value unless autogroup scheduling is off
// (kernel.sched_autogroup_enabled=0): see docs/speed.md.
func BenchmarkInProcessSpeedup(b *testing.B) {
	if cpus, err := affinity.Allowed(); err != nil || len(cpus) < 2 {
		b.Skip("needs two CPUs")
	}
	for _, name := range []string{"mlp", "cnn", "resnet"} {
		r, err := zoo.RecipeFor(name)
		if err != nil {
			b.Fatal(err)
		}
		cut := speedupCut(b, r)
		for _, procs := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/procs=%d", name, procs), func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				benchSpeedup(b, r, cut)
			})
		}
	}
}

// speedupMinibatches is the minibatches one op of BenchmarkInProcessSpeedup
// streams.
const speedupMinibatches = 20

// speedupCut is the recipe's model cut into 2 stages balanced by the time
// each takes on one thread (train.Balanced with GOMAXPROCS=1): every variant
// of the benchmark trains the same plan.
func speedupCut(b *testing.B, r zoo.Recipe) []int {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cfg := train.Config{Hyper: r.Run}
	cfg.Stages = 2
	trainSet, _, err := r.Load("embedded", cfg.Microbatch)
	if err != nil {
		b.Fatal(err)
	}
	cut, _, err := train.Balanced(r.Build, trainSet, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cut
}

// cutVM is the recipe's model cut at cut, on a VM running s with n
// microbatches a step and the recipe's activations and solver, and count
// minibatches of the embedded data for it; the caller closes the VM.
func cutVM(b *testing.B, r zoo.Recipe, cut []int, s schedule.Schedule, n, count int) (*asyncvm.VM, []map[*gorgonia.Node]gorgonia.Value) {
	cfg := train.Config{Hyper: r.Run}
	m, err := r.Build(cfg.Microbatch, cfg.Seed)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.CutAtOps(cut...))
	if err != nil {
		b.Fatal(err)
	}
	vm, err := asyncvm.New(plan, asyncvm.WithSchedule(s), asyncvm.WithMicrobatches(n),
		asyncvm.WithActivations(cfg.Activations()),
		asyncvm.WithSolver(func(int) gorgonia.Solver { return recipeSolver(r) }))
	if err != nil {
		b.Fatal(err)
	}
	return vm, taxBatches(b, r, m, cfg.Microbatch, n, count)
}

// timedRuns runs batches on vm once to fill the pipeline, then once per
// b.Loop under the timer, which it stops after.
func timedRuns(b *testing.B, vm *asyncvm.VM, batches []map[*gorgonia.Node]gorgonia.Value) {
	ctx := context.Background()
	if _, err := vm.Run(ctx, batches); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := vm.Run(ctx, batches); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}

func benchSpeedup(b *testing.B, r zoo.Recipe, cut []int) {
	cfg := train.Config{Hyper: r.Run}
	vm, batches := cutVM(b, r, cut, schedule.PipeMare(), cfg.Microbatches, speedupMinibatches)
	defer vm.Close()
	timedRuns(b, vm, batches)
	samples := b.N * speedupMinibatches * cfg.Microbatches * cfg.Microbatch
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkFlushBubble trains the CNN cut into 2 stages balanced on one
// thread with 1F1B with flush at N = 8 (16 rows a microbatch) on both
// cores, and reports the measured samples/s beside the bubble formula's:
// a step of a flushed 1F1B pipeline takes Σ_i t_i + (N−1)·max_i t_i, for
// stage times t_i per microbatch (forward and backward, measured in the
// same run), which is (N+P−1)·t when the stages are even. measured/formula
// is how close the engine comes to it.
func BenchmarkFlushBubble(b *testing.B) {
	r, err := zoo.RecipeFor("cnn")
	if err != nil {
		b.Fatal(err)
	}
	r.Run.Microbatches = 8
	cut := speedupCut(b, r)
	m, err := r.Build(r.Run.Microbatch, r.Run.Seed)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.CutAtOps(cut...))
	if err != nil {
		b.Fatal(err)
	}
	const n = 8
	vm, err := asyncvm.New(plan, asyncvm.WithSchedule(schedule.OneFOneB()), asyncvm.WithMicrobatches(n),
		asyncvm.WithSolver(func(int) gorgonia.Solver { return recipeSolver(r) }))
	if err != nil {
		b.Fatal(err)
	}
	defer vm.Close()
	batches := taxBatches(b, r, m, r.Run.Microbatch, n, 10)
	ctx := context.Background()
	if _, err := vm.Run(ctx, batches); err != nil { // warm up
		b.Fatal(err)
	}
	before := vm.Report()
	b.ResetTimer()
	for b.Loop() {
		if _, err := vm.Run(ctx, batches); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	rep := vm.Report()
	micro := float64(b.N * len(batches) * n)
	var sum, most float64
	for i, s := range rep.PerStage {
		busy := s.BusyFraction*rep.Training.Seconds() - before.PerStage[i].BusyFraction*before.Training.Seconds()
		t := busy / micro
		sum += t
		most = max(most, t)
	}
	step := sum + (n-1)*most
	formula := float64(n*r.Run.Microbatch) / step
	measured := micro * float64(r.Run.Microbatch) / b.Elapsed().Seconds()
	b.ReportMetric(measured, "samples/s")
	b.ReportMetric(formula, "formula-samples/s")
	b.ReportMetric(measured/formula, "measured/formula")
}

// BenchmarkZeroBubble trains the CNN cut into 2 stages balanced on one
// thread with ZB-H1 and ZB-H2 at N = 8 on both cores, and reports the
// utilization the engine measured beside two predictions: the schedule's
// formula, which takes every stage's F, I and W to last one unit each
// (schedule.Measured with EqualPasses: 1 − 1/(3N+1) for ZB-H1 at P = 2),
// and the replay of the actions' own measured durations on one virtual
// device per stage (VM.Replay), which is the formula at this model's
// durations. measured/replay is what the engine loses to its own costs;
// formula against replay, what the model's unequal passes cost (its first
// stage has no input gradient: its W is its whole backward).
func BenchmarkZeroBubble(b *testing.B) {
	if cpus, err := affinity.Allowed(); err != nil || len(cpus) < 2 {
		b.Skip("needs two CPUs")
	}
	r, err := zoo.RecipeFor("cnn")
	if err != nil {
		b.Fatal(err)
	}
	cut := speedupCut(b, r)
	const n = 8
	for _, s := range []schedule.Schedule{schedule.ZBH1(), schedule.ZBH2()} {
		b.Run(s.Name, func(b *testing.B) {
			vm, batches := cutVM(b, r, cut, s, n, 10)
			defer vm.Close()
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := vm.Run(ctx, batches); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			measured, replay := vm.Report().Utilization, vm.Replay().Utilization
			formula := 1 - schedule.Measured(s, 2, n, len(batches)).Bubble
			b.ReportMetric(measured, "utilization")
			b.ReportMetric(replay, "replay-utilization")
			b.ReportMetric(formula, "formula-utilization")
			b.ReportMetric(measured/replay, "measured/replay")
			b.ReportMetric(measured/formula, "measured/formula")
		})
	}
}

// BenchmarkZeroBubbleV trains the CNN with ZB-V in one process: 4 stages,
// two on each core (worker 0 hosts stages 0 and 3, worker 1 stages 1 and
// 2), cut where train.Balanced balances the workers by time measured here,
// at N = 4, 8 and 16. It reports three speed-ups over running the same
// actions one after another on one core: the run's (Σ busy ÷ wall),
// the replay of ZB-V's order with each action's own measured duration on
// one virtual device per worker (schedule.ReplayWorkers), and the bound
// no order of those actions can pass on two workers (Σ busy ÷ the busier
// worker's busy). measured/replay is what the engine loses to its own
// costs; replay against bound, what ZB-V's order loses to this model's
// unequal passes (stage 0 has no input gradient, stage 1 no weights).
//
//	go test -c -o asyncvm.test ./asyncvm/
//	./asyncvm.test -test.run '^$' -test.bench ZeroBubbleV -test.count 3
func BenchmarkZeroBubbleV(b *testing.B) {
	if cpus, err := affinity.Allowed(); err != nil || len(cpus) < 2 {
		b.Skip("needs two CPUs")
	}
	r, err := zoo.RecipeFor("cnn")
	if err != nil {
		b.Fatal(err)
	}
	s := schedule.ZBV()
	cut := vCut(b, r, s)
	const p = 4
	for _, n := range []int{4, 8, 16} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			vm, batches := cutVM(b, r, cut, s, n, 10)
			defer vm.Close()
			timedRuns(b, vm, batches)
			evs, worker := vm.Events(), s.WorkerOf(p)
			dur := make([]map[schedule.Action]float64, p)
			perWorker := make([]float64, p/2)
			total, steps := 0.0, 0
			for i, list := range evs {
				dur[i] = make(map[schedule.Action]float64, len(list))
				for _, e := range list {
					d := float64(e.End - e.Start)
					dur[i][e.Action] = d
					perWorker[worker(i)] += d
					total += d
					if i == 0 && e.Action.Op == schedule.OpUpdate {
						steps++
					}
				}
			}
			replay := schedule.ReplayWorkers(s.Workers(p, n, steps), schedule.Chain(p), worker,
				func(i int, a schedule.Action) float64 { return dur[i][a] })
			var first, last time.Duration
			for i, list := range evs {
				if len(list) == 0 {
					b.Fatalf("stage %d ran nothing", i)
				}
				if i == 0 || list[0].Start < first {
					first = list[0].Start
				}
				last = max(last, list[len(list)-1].End)
			}
			measured := total / float64(last-first)
			replayed := total / float64(replay.Makespan)
			b.ReportMetric(measured, "speedup")
			b.ReportMetric(replayed, "replay-speedup")
			b.ReportMetric(total/max(perWorker[0], perWorker[1]), "bound-speedup")
			b.ReportMetric(measured/replayed, "measured/replay")
		})
	}
}

// vCut is the recipe's model cut into 4 stages for s on 2 workers, balanced
// by the time each takes on one thread for this process (train.Balanced,
// graphsplit.InOneProcess).
func vCut(b *testing.B, r zoo.Recipe, s schedule.Schedule) []int {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cfg := train.Config{Hyper: r.Run, Schedule: s}
	cfg.Stages = 4
	trainSet, _, err := r.Load("embedded", cfg.Microbatch)
	if err != nil {
		b.Fatal(err)
	}
	cut, _, err := train.Balanced(r.Build, trainSet, cfg, graphsplit.InOneProcess())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("cut %v", cut)
	return cut
}
