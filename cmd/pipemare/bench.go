package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runspec"
)

// benchCmd measures what a placement buys: the same training (train's
// flags, and the cut train would choose, measured once) placed as the
// flags say — in this process on every CPU, or -procs N [-pin] — and in one
// process on one CPU (train -cpus: GOMAXPROCS follows), rounds times, A B B A …
// so that the machine's drift falls on both, each a child `pipemare train`
// (experiment.Bench.RunChildren). It writes bench.json (every run, the
// medians, the speed-up) and, as report.json, the last placed run's report
// with the speed-up beside it.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare bench", flag.ContinueOnError)
	var o options
	o.register(fs)
	var t trainFlags
	t.register(fs)
	rounds := fs.Int("rounds", 3, "interleaved rounds of the placed run and the one-CPU run")
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
	t.procsSet = set["procs"]
	if _, _, err := t.place(); err != nil {
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
	if err := experiment.ChooseCut(&cfg, true, "", r, trainSet, stdout); err != nil {
		return err
	}
	var given []string
	fs.Visit(func(f *flag.Flag) { given = append(given, "-"+f.Name+"="+f.Value.String()) })
	placed, oneCPU := benchArgs(given, cfg.Cut, t.procs, t.cpu.pin, affinity.Format(allowed[len(allowed)-1:]))
	b := experiment.Bench{Placed: experiment.BenchPlacement(t.procs, t.cpu.pin), Against: "one process on one CPU"}
	out := rundir.Dir{Path: o.out, Files: []string{"bench.json", "report.json"}}
	if err := out.Prepare(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench: %s against %s, %d rounds\n", b.Placed, b.Against, *rounds)
	last, err := b.RunChildren(ctx, "", withOut(placed), withOut(oneCPU), o.out, *rounds, stdout)
	if err != nil {
		return err
	}
	return b.Write(out, last, stdout)
}

// benchOwn are the flags of pipemare bench that its trainings are not
// given as they are: its own (-out, -rounds), and those of the placement
// and the cut, which benchArgs sets.
var benchOwn = []string{"out", "rounds", "stages", "procs", "pin", "insecure"}

// benchArgs are the command lines (after the program's name) of a
// bench's two trainings, pipemare train with one minibatch traced
// (-trace-steps=1) and given's flags, those given to bench as -name=value
// in the order given, minus bench's own and the placement's (-out,
// -rounds, -stages, -procs, -pin, -insecure), with the cut fixed (-cut,
// when cut is set) so that both train the same stages. The placed run
// adds procs stage processes (-procs, plaintext on loopback, each pinned
// to a CPU of its own with pin) when procs > 0; the other runs in one
// process on the CPUs oneCPU (-cpus). Neither has -out: withOut adds it.
func benchArgs(given []string, cut []int, procs int, pin bool, oneCPU string) (placed, against []string) {
	base := []string{"train", "-trace-steps=1"}
	for _, a := range given {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(benchOwn, name) {
			base = append(base, a)
		}
	}
	if cut != nil {
		base = append(base, "-cut="+runspec.FormatCut(cut))
	}
	placed = slices.Clone(base)
	if procs > 0 {
		placed = append(placed, fmt.Sprintf("-procs=%d", procs), "-insecure")
		if pin {
			placed = append(placed, "-pin")
		}
	}
	return placed, append(base, "-cpus="+oneCPU)
}

// withOut is the child training of args writing to its out (-out).
func withOut(args []string) experiment.ChildArgs {
	return func(out string) []string { return append(slices.Clip(args), "-out="+out) }
}
