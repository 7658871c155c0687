package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/experiment"
	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/train"
)

// benchCmd measures what a placement buys: the same training (train's
// flags, and the cut train would choose, measured once) placed as the
// flags say — in this process on every CPU, or -procs N [-pin] — and in one
// process on one CPU (train -cpus: GOMAXPROCS follows), rounds times, A B B A …
// so that the machine's drift falls on both, each a child `pipemare train`.
// It writes bench.json (every run, the medians, the speed-up) and, as
// report.json, the last placed run's report with the speed-up beside it.
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
	if err := chooseCut(&cfg, inProcess, "", r, trainSet, stdout); err != nil {
		return err
	}
	var base []string // train's flags for both runs, the cut fixed
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "out" && f.Name != "rounds" && f.Name != "stages" && f.Name != "procs" && f.Name != "pin" && f.Name != "insecure" {
			base = append(base, "-"+f.Name+"="+f.Value.String())
		}
	})
	if cfg.Cut != nil {
		base = append(base, "-cut="+train.FormatCut(cfg.Cut))
	}
	placed := append([]string{}, base...)
	if t.procs > 0 {
		placed = append(placed, fmt.Sprintf("-procs=%d", t.procs), "-insecure")
		if t.cpu.pin {
			placed = append(placed, "-pin")
		}
	}
	oneCPU := append(append([]string{}, base...), "-cpus="+affinity.Format(allowed[len(allowed)-1:]))
	b := experiment.Bench{Placed: placementLabel(t), Against: "one process on one CPU"}
	out := rundir.Dir{Path: o.out, Files: []string{"bench.json", "report.json"}}
	if err := out.Prepare(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench: %s against %s, %d rounds\n", b.Placed, b.Against, *rounds)
	var last []byte
	err = b.RunBench(ctx, *rounds, func(ctx context.Context, kind string, round int) (experiment.BenchRun, error) {
		run := oneCPU
		if kind == "placed" {
			run = placed
		}
		dir := filepath.Join(o.out, fmt.Sprintf("%s-%d", kind, round))
		rep, raw, err := benchTrain(ctx, append(run, "-out="+dir))
		if kind == "placed" {
			last = raw
		}
		return experiment.BenchRun{SamplesPerSec: rep.samplesPerSec, WeightsSHA256: rep.weights, Dir: dir}, err
	}, stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "speed-up %.2f× (%.2f–%.2f over the rounds): %.1f samples/s %s, %.1f %s\n", b.Speedup, b.SpeedupMin, b.SpeedupMax, b.PlacedSamplesPerSec, b.Placed, b.AgainstSamplesPerSec, b.Against)
	if !b.SameWeights {
		fmt.Fprintln(stdout, "the runs trained different weights: the placement changed the arithmetic (a bug)")
	}
	if err := out.WriteJSON("bench.json", b); err != nil {
		return err
	}
	var report map[string]any
	if err := json.Unmarshal(last, &report); err != nil {
		return errors.Wrap(err, "the placed run's report.json")
	}
	report["speedup"] = b
	if err := out.WriteJSON("report.json", report); err != nil {
		return err
	}
	if !b.SameWeights {
		return errors.New("the placed and the one-CPU runs trained different weights")
	}
	return nil
}

// placementLabel names the placement train's flags ask for.
func placementLabel(t trainFlags) string {
	switch {
	case t.procs > 0 && t.cpu.pin:
		return fmt.Sprintf("%d stage processes, each pinned to a CPU", t.procs)
	case t.procs > 0:
		return fmt.Sprintf("%d stage processes", t.procs)
	}
	return fmt.Sprintf("one process on %d CPUs", runtime.GOMAXPROCS(0))
}

// trained is what bench reads of a run's report.json.
type trained struct {
	samplesPerSec float64
	weights       string
}

// benchTrain runs pipemare train with args as a child of this process
// (killed with it), and returns what its report says and the report.
func benchTrain(ctx context.Context, args []string) (trained, []byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return trained{}, nil, err
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{"train", "-trace-steps=1"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	launch.OwnChild(cmd)
	runtime.LockOSThread() // Pdeathsig follows the thread that forked the child
	err = cmd.Run()
	runtime.UnlockOSThread()
	if err != nil {
		return trained{}, nil, errors.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var dir string
	for _, a := range args {
		if d, ok := strings.CutPrefix(a, "-out="); ok {
			dir = d
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return trained{}, nil, err
	}
	var r struct {
		Result struct {
			WeightsSHA256 string `json:"weights_sha256"`
			Report        struct {
				SamplesPerSec float64 `json:"samples_per_sec"`
			} `json:"report"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return trained{}, nil, errors.Wrapf(err, "%s", filepath.Join(dir, "report.json"))
	}
	return trained{samplesPerSec: r.Result.Report.SamplesPerSec, weights: r.Result.WeightsSHA256}, raw, nil
}
