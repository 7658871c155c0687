package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// chooseCut gives cfg the cut train runs. -cut is taken as given, and
// -stages fine cuts at every layer. A number of stages (-stages P) is cut
// where the stages take as long as each other on this machine
// (train.Balanced, timed on one thread: each stage of a pipeline gets about
// one core), when this process drives every stage — in this process, or
// -procs, which hands the children the cut — unless a resumed run
// (resumeDir, its settings) recorded one, which it keeps. Stages on other
// hosts or under a launcher each build their own plan, so every process
// must cut alike without measuring: they take the cost estimate's cut,
// unless -cut gives one (pipemare plan -stages P measures it).
func chooseCut(cfg *train.Config, w where, resumeDir string, r zoo.Recipe, trainSet zoo.Data, stdout io.Writer) error {
	if cfg.Cut != nil || cfg.Stages == 0 {
		return nil
	}
	if resumeDir != "" {
		if cut := rundir.RecordedCut(resumeDir); cut != nil {
			cfg.Cut = cut
			return nil
		}
	}
	if w != inProcess && w != localProcs {
		fmt.Fprintf(stdout, "%d stages cut by the cost estimate, alike on every host (pipemare plan -stages %d measures a balanced cut to pass as -cut)\n", cfg.Stages, cfg.Stages)
		return nil
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cut, bal, err := train.Balanced(r.Build, trainSet, *cfg)
	if err != nil {
		return err
	}
	cfg.Cut = cut
	fmt.Fprintf(stdout, "%d stages cut at ops %s, balanced on this machine: %s\n", cfg.Stages, train.FormatCut(cut), bal)
	return nil
}
