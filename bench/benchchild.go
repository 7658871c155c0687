package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
)

// BenchPlacement names the placement of procs stage processes of this
// host (each pinned to a CPU with pin), or of this process on its
// GOMAXPROCS CPUs when procs is 0: bench.json's placed.
func BenchPlacement(procs int, pin bool) string {
	switch {
	case procs > 0 && pin:
		return fmt.Sprintf("%d stage processes, each pinned to a CPU", procs)
	case procs > 0:
		return fmt.Sprintf("%d stage processes", procs)
	}
	return fmt.Sprintf("one process on %d CPUs", runtime.GOMAXPROCS(0))
}

// TrainChild runs exe ("": this program) with args, a pipemare train
// command line that writes its run directory to dir, as a
// child process this one owns (launch.OwnChild: it dies with this one,
// even when this one is killed), and returns what dir's report.json
// (rundir.Report) says of the run — its samples/s and weights, as a
// BenchRun of dir — and the report itself. A child that fails is an
// error with its standard error.
func TrainChild(ctx context.Context, exe string, args []string, dir string) (BenchRun, []byte, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return BenchRun{}, nil, err
		}
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	launch.OwnChild(cmd)
	runtime.LockOSThread() // Pdeathsig follows the thread that forked the child
	err := cmd.Run()
	runtime.UnlockOSThread()
	if err != nil {
		return BenchRun{}, nil, errors.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	path := filepath.Join(dir, "report.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return BenchRun{}, nil, err
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
		return BenchRun{}, nil, errors.Wrapf(err, "%s", path)
	}
	return BenchRun{SamplesPerSec: r.Result.Report.SamplesPerSec, WeightsSHA256: r.Result.WeightsSHA256, Dir: dir}, raw, nil
}

// ChildArgs are the arguments (after the program's name) of a child
// training that writes its run directory to out.
type ChildArgs func(out string) []string

// RunChildren runs b's rounds (RunBench) as child trainings of exe ("":
// this program; TrainChild), the placed run with the arguments placed
// gives, the other with against's, each writing its run directory into
// dir as <kind>-<round>. It returns the last placed run's report.json,
// for Write.
func (b *Bench) RunChildren(ctx context.Context, exe string, placed, against ChildArgs, dir string, rounds int, log io.Writer) ([]byte, error) {
	var last []byte
	err := b.RunBench(ctx, rounds, func(ctx context.Context, kind string, round int) (BenchRun, error) {
		args := against
		if kind == "placed" {
			args = placed
		}
		out := filepath.Join(dir, fmt.Sprintf("%s-%d", kind, round))
		r, raw, err := TrainChild(ctx, exe, args(out), out)
		if kind == "placed" {
			last = raw
		}
		r.Dir = out
		return r, err
	}, log)
	return last, err
}

// Write says on log what b measured — the speed-up, its range over the
// rounds and both samples/s, whether the runs trained different weights,
// and whether the machine's speed moved under them (ProbeSpread above
// probeMoved), then the speed-up of the rounds it held around — and writes into out bench.json (b) and report.json: the last
// placed run's report (placedReport, as RunChildren returns it) with b
// beside its keys under "speedup". Runs that trained different weights
// are an error once everything is written: a placement changes timing,
// never results.
func (b *Bench) Write(out rundir.Dir, placedReport []byte, log io.Writer) error {
	fmt.Fprintf(log, "speed-up %.2f× (%.2f–%.2f over the rounds): %.1f samples/s %s, %.1f %s\n", b.Speedup, b.SpeedupMin, b.SpeedupMax, b.PlacedSamplesPerSec, b.Placed, b.AgainstSamplesPerSec, b.Against)
	if !b.SameWeights {
		fmt.Fprintln(log, "the runs trained different weights: the placement changed the arithmetic (a bug)")
	}
	if b.ProbeSpread > probeMoved {
		fmt.Fprintf(log, "the machine's speed moved during this bench: a fixed loop took up to %.2f× its fastest around a run (bench.json's probe_ns, probe_after_ns); compare a round's two runs where their probes agree, not samples/s across rounds\n", b.ProbeSpread)
		if b.SteadyRounds > 0 {
			fmt.Fprintf(log, "speed-up %.2f× (%.2f–%.2f) over the %d of %d rounds whose probes all held within %.0f%% of the fastest\n", b.SteadySpeedup, b.SteadySpeedupMin, b.SteadySpeedupMax, b.SteadyRounds, len(b.Runs)/2, 100*(probeMoved-1))
		} else {
			fmt.Fprintf(log, "no round's probes all held within %.0f%% of the fastest: measure again\n", 100*(probeMoved-1))
		}
	}
	if err := out.WriteJSON("bench.json", b); err != nil {
		return err
	}
	var report map[string]any
	if err := json.Unmarshal(placedReport, &report); err != nil {
		return errors.Wrap(err, "the placed run's report.json")
	}
	report["speedup"] = b
	if err := out.WriteJSON("report.json", report); err != nil {
		return err
	}
	if !b.SameWeights {
		return errors.Errorf("the runs on %s and on %s trained different weights", b.Placed, b.Against)
	}
	return nil
}
