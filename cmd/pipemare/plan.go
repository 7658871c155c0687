package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/zoo"
	"gorgonia.org/gorgonia"
)

func planCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pipemare plan", flag.ContinueOnError)
	model := fs.String("model", "resnet", modelUsage(""))
	stages := fs.String("stages", "fine", "number of stages, or fine for one per layer")
	microbatch := fs.Int("microbatch", 16, "rows per microbatch")
	dot := fs.String("dot", "", "also write the cut graph in Graphviz DOT to this file")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	r, err := zoo.RecipeFor(*model)
	if err != nil {
		return usageError(fs, "-model %q: %v", *model, err)
	}
	if *microbatch < 1 {
		return usageError(fs, "-microbatch %d: must be positive", *microbatch)
	}
	opts := []graphsplit.Option{graphsplit.FineGrained()}
	if *stages != "fine" {
		p, err := strconv.Atoi(*stages)
		if err != nil || p < 1 {
			return usageError(fs, "-stages %q: a positive number or fine", *stages)
		}
		opts = append(opts, graphsplit.Stages(p))
	}
	m, err := r.Build(*microbatch, 1)
	if err != nil {
		return err
	}
	feeds, err := firstMicrobatch(r, m)
	if err != nil {
		return err
	}
	keep := r.Run.KeepActivations
	if *stages != "fine" { // balanced by measuring, on one thread, as train does
		opts = append(opts, graphsplit.Profiled(feeds, keep))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, opts...)
	if err != nil {
		return err
	}
	defer plan.Close()
	var times []graphsplit.StageTime
	if plan.Balance != nil {
		times = plan.Balance.Times // what the cut was chosen by
	} else if times, err = plan.Time(feeds, keep, 5); err != nil {
		return err
	}
	var f *os.File
	if *dot != "" { // before printing anything: a path that cannot be written fails first
		if f, err = os.Create(*dot); err != nil {
			return fmt.Errorf("-dot: %w", err)
		}
	}
	fmt.Fprintf(stdout, "%s at microbatch %d: %d stages\n", m.Name, *microbatch, len(plan.Stages))
	if err := plan.WriteTable(stdout); err != nil {
		return err
	}
	writeBalance(stdout, plan, times)
	if err := writeMemory(stdout, m.Name, plan); err != nil {
		return err
	}
	if f == nil {
		return nil
	}
	if err := plan.WriteDOT(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", *dot, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", *dot, err)
	}
	fmt.Fprintf(stdout, "wrote %s (render with dot -Tsvg)\n", *dot)
	return nil
}

// firstMicrobatch is the first microbatch of r's embedded training data,
// as feeds of m.
func firstMicrobatch(r zoo.Recipe, m *zoo.Model) (map[*gorgonia.Node]gorgonia.Value, error) {
	trainSet, _, err := r.Load("", m.Batch)
	if err != nil {
		return nil, err
	}
	idx := make([]int, m.Batch)
	for i := range idx {
		idx[i] = i
	}
	x, y := trainSet.Batch(m, idx)
	return map[*gorgonia.Node]gorgonia.Value{m.X: x, m.Y: y}, nil
}

// writeBalance prints each stage's measured time for one microbatch, on
// one thread, and what it makes of a pipeline with one device per stage:
// the slowest stage sets the pace, so stage i is busy t_i / max t. A cut
// that leaves most stages idle says how few stages would hold the work at
// the slowest one's pace.
func writeBalance(w io.Writer, plan *graphsplit.Plan, times []graphsplit.StageTime) {
	var total, most time.Duration
	for _, t := range times {
		total += t.Total()
		most = max(most, t.Total())
	}
	fmt.Fprintf(w, "\nmeasured on this machine, one microbatch, one thread (a stage of a pipeline has about a core):\n")
	fmt.Fprintf(w, "  stage  forward ms  backward ms  share  busy with a device per stage\n")
	idle := 0
	for i, t := range times {
		busy := float64(t.Total()) / float64(most)
		if busy < 0.5 {
			idle++
		}
		fmt.Fprintf(w, "  %5d  %10.3f  %11.3f  %4.0f%%  %.2f\n", i, ms(t.Forward), ms(t.Backward), 100*float64(t.Total())/float64(total), busy)
	}
	p := len(times)
	fmt.Fprintf(w, "one device per stage: %.2f busy on average, %.2f× one device", float64(total)/float64(most)/float64(p), float64(total)/float64(most))
	if b := plan.Balance; b != nil {
		fmt.Fprintf(w, "; balanced by measuring (%s): -cut %s\n", b, formatCut(plan.Cuts()))
		return
	}
	fmt.Fprintln(w)
	if k := int(total / most); p > 1 && idle > p/2 && k < p {
		fmt.Fprintf(w, "%d of %d stages are less than half busy: the slowest holds %.0f%% of the work, so %d stages at its pace would hold all of it and go as fast (pipemare plan -stages %d measures a balanced cut)\n", idle, p, 100*float64(most)/float64(total), max(k, 1), max(k, 1))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
