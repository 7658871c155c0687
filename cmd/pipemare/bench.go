package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pipemare/pipemare/bench"
	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/runspec"
)

// benchCmd measures what a placement buys: the same training (train's
// flags, and the cut train would choose, measured once) placed as the
// flags say — in this process on every CPU, or -procs N [-pin] — and in one
// process on one CPU (train -cpus: GOMAXPROCS follows; -against cores: on
// every CPU, for stage processes against one process), rounds times, A B B A …
// so that the machine's drift falls on both, each a child `pipemare train`
// (bench.Bench.RunChildren). It writes bench.json (every run, the
// medians, the speed-up) and, as report.json, the last placed run's report
// with the speed-up beside it. With -target it measures time to that test
// accuracy instead (timeToAccuracy).
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare bench", flag.ContinueOnError)
	var o options
	o.register(fs)
	var t trainFlags
	t.register(fs)
	rounds := fs.Int("rounds", 3, "interleaved rounds of the placed run and the one-CPU run (with -target: seeds, from -seed on)")
	target := fs.Float64("target", 0, "time to accuracy: train each seed in each of -placements, and report the time to this test accuracy")
	against := fs.String("against", "one-cpu", "what the placed run is measured against: one-cpu (one process on one CPU) or cores (one process on every CPU: with -procs, the stage processes' share of what one process reaches on the same CPUs, in the same rounds)")
	placements := fs.String("placements", strings.Join(bench.TargetPlacementNames, ","), "with -target: where to train (one-cpu, cores: one process on every CPU, procs: a pinned process per stage)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	set := o.set()
	for _, name := range []string{"resume", "checkpoint-every", "stage-addrs", "certs", "cpus"} {
		if set[name] {
			return usageError(fs, "-%s: bench runs trainings of its own on this host (and pins the one-CPU run itself)", name)
		}
	}
	if *rounds < 1 {
		return usageError(fs, "-rounds %d: at least one", *rounds)
	}
	if *target > 0 && (set["procs"] || set["pin"]) {
		return usageError(fs, "-procs, -pin: with -target, -placements says where the trainings run")
	}
	if *against != "one-cpu" && *against != "cores" {
		return usageError(fs, "-against %q: one-cpu or cores", *against)
	}
	if *target > 0 && set["against"] {
		return usageError(fs, "-against: with -target, -placements says where the trainings run")
	}
	if *against == "cores" && !set["procs"] {
		return usageError(fs, "-against cores: the placed run is one process on every CPU too; give -procs N to measure stage processes against it")
	}
	if *target < 0 || *target > 1 {
		return usageError(fs, "-target %g: a test accuracy between 0 and 1", *target)
	}
	t.procsSet = set["procs"]
	where, _, err := t.place()
	if err != nil {
		return usageOr(fs, err)
	}
	allowed, err := affinity.Allowed()
	if err != nil {
		return err
	}
	r, trainSet, _, cfg, err := o.run()
	if err != nil {
		return err
	}
	if *target > 0 { // one cut for every placement: a placement in processes pays for what it sends
		where = launch.InProcess
		if slices.Contains(strings.Split(*placements, ","), "procs") {
			where = launch.LocalProcs
		}
	}
	if err := runout.ChooseCut(&cfg, where, t.net.Transport, "", r, trainSet, stdout); err != nil {
		return err
	}
	var given []string
	fs.Visit(func(f *flag.Flag) { given = append(given, "-"+f.Name+"="+f.Value.String()) })
	oneCPU := affinity.Format(allowed[len(allowed)-1:])
	if *target > 0 {
		stages := cfg.Stages
		if cfg.Cut != nil {
			stages = len(cfg.Cut) + 1
		}
		ps, err := bench.TargetPlacements(strings.Split(*placements, ","), stages, oneCPU)
		if err != nil {
			return usageError(fs, "%s", inFlags(err))
		}
		seeds := make([]int64, *rounds)
		for i := range seeds {
			seeds[i] = cfg.Seed + int64(i)
		}
		return timeToAccuracy(ctx, *target, targetArgs(given, cfg.Cut), seeds, ps, o.out, stdout)
	}
	other := bench.TargetPlacement{Name: "one-cpu", CPUs: oneCPU}
	b := bench.Bench{Placed: bench.BenchPlacement(t.procs, t.cpu.pin), Against: "one process on one CPU", AgainstKind: other.Name}
	if *against == "cores" {
		other = bench.TargetPlacement{Name: "cores"}
		b.Against, b.AgainstKind = fmt.Sprintf("one process on %d CPUs", len(allowed)), other.Name
	}
	placedRun, otherRun := benchArgs(given, cfg.Cut, t.procs, t.cpu.pin, other)
	out := rundir.Dir{Path: o.out, Files: []string{"bench.json", "report.json"}}
	if err := out.Prepare(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench: %s against %s, %d rounds\n", b.Placed, b.Against, *rounds)
	last, err := b.RunChildren(ctx, "", withOut(placedRun), withOut(otherRun), o.out, *rounds, stdout)
	if err != nil {
		return err
	}
	return b.Write(out, last, stdout)
}

// timeToAccuracy is bench -target: it trains args (targetArgs) with each
// seed in each placement, each a child pipemare train writing its run
// directory into out, and writes bench.json and the table
// (bench.TimeToAccuracy).
func timeToAccuracy(ctx context.Context, target float64, args []string, seeds []int64, ps []bench.TargetPlacement, out string, stdout io.Writer) error {
	dir := rundir.Dir{Path: out, Files: []string{"bench.json"}}
	if err := dir.Prepare(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench: time to test accuracy %.4f, %d seeds in %d placements\n", target, len(seeds), len(ps))
	tta := bench.TimeToAccuracy{Target: target}
	child := func(p bench.TargetPlacement, seed int64) bench.ChildArgs {
		return withOut(append(placedArgs(args, p), fmt.Sprintf("-seed=%d", seed)))
	}
	if err := tta.RunTargetChildren(ctx, "", child, out, seeds, ps, stdout); err != nil {
		return err
	}
	return tta.Write(dir, stdout)
}

// benchOwn are the flags of pipemare bench that its trainings are not
// given as they are: its own (-out, -rounds), and those of the placement
// and the cut, which benchArgs sets.
var benchOwn = []string{"out", "rounds", "stages", "procs", "pin", "insecure", "transport", "against"}

// targetOwn are the flags of pipemare bench -target that its trainings are
// not given as they are: bench's own, the placement's, and the seed, which
// each training sets.
var targetOwn = append(slices.Clone(benchOwn), "target", "placements", "seed")

// benchArgs are the command lines (after the program's name) of a
// bench's two trainings (trainArgs: given's flags but bench's own, the cut
// fixed so that both train the same stages). The placed run adds procs
// stage processes (-procs, plaintext on loopback, each pinned to a CPU of
// its own with pin) when procs > 0; the other runs in one process as other
// says (on its CPUs, -cpus, or on every CPU); a -transport given is the
// placed run's. Neither has -out: withOut adds it.
func benchArgs(given []string, cut []int, procs int, pin bool, other bench.TargetPlacement) (placed, against []string) {
	base := trainArgs(given, cut, benchOwn)
	placed = placedArgs(base, bench.TargetPlacement{Procs: procs, Pin: pin})
	if procs > 0 { // -transport: the placed run's
		for _, a := range given {
			if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); name == "transport" {
				placed = append(placed, a)
			}
		}
	}
	return placed, placedArgs(base, other)
}

// targetArgs is the command line (after the program's name) of a
// bench -target's trainings, before the placement and the seed: given's
// flags but bench's own, the placement's and -seed, with the cut fixed
// (trainArgs) so that every placement trains the same stages.
func targetArgs(given []string, cut []int) []string { return trainArgs(given, cut, targetOwn) }

// trainArgs is a bench's pipemare train command line with one minibatch
// traced (-trace-steps=1): given's flags (-name=value, in the order
// given) but those named in own, and the cut fixed (-cut, in place of the
// -stages or -cut given, when cut has a position: one stage has none, and
// keeps its -stages).
func trainArgs(given []string, cut []int, own []string) []string {
	base := []string{"train", "-trace-steps=1"}
	for _, a := range given {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		drop := slices.Contains(own, name)
		if name == "stages" || name == "cut" {
			drop = len(cut) > 0
		}
		if !drop {
			base = append(base, a)
		}
	}
	if len(cut) > 0 {
		base = append(base, "-cut="+runspec.FormatCut(cut))
	}
	return base
}

// placedArgs is args placed as p says: in stage processes (-procs, on
// loopback in plaintext, -pin), or on the CPUs p.CPUs (-cpus).
func placedArgs(args []string, p bench.TargetPlacement) []string {
	out := slices.Clone(args)
	if p.Procs > 0 {
		out = append(out, fmt.Sprintf("-procs=%d", p.Procs), "-insecure")
		if p.Pin {
			out = append(out, "-pin")
		}
	}
	if p.CPUs != "" {
		out = append(out, "-cpus="+p.CPUs)
	}
	return out
}

// withOut is the child training of args writing to its out (-out).
func withOut(args []string) bench.ChildArgs {
	return func(out string) []string { return append(slices.Clip(args), "-out="+out) }
}
