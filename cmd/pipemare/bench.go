package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/rundir"
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
	placed, oneCPU := experiment.BenchArgs(given, cfg.Cut, t.procs, t.cpu.pin, affinity.Format(allowed[len(allowed)-1:]))
	b := experiment.Bench{Placed: experiment.BenchPlacement(t.procs, t.cpu.pin), Against: "one process on one CPU"}
	out := rundir.Dir{Path: o.out, Files: []string{"bench.json", "report.json"}}
	if err := out.Prepare(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench: %s against %s, %d rounds\n", b.Placed, b.Against, *rounds)
	last, err := b.RunChildren(ctx, "", placed, oneCPU, o.out, *rounds, stdout)
	if err != nil {
		return err
	}
	return b.Write(out, last, stdout)
}
