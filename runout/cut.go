package runout

import (
	"fmt"
	"io"
	"runtime"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// ChooseCut gives cfg the cut pipemare train runs where its stages run
// (where). A cut given (cfg.Cut) is taken as it is, and a run of one stage
// per layer (cfg.Stages 0) needs none. A number of stages is cut where the
// stages take as long as each other on this machine (train.Balanced, timed
// on one thread: each stage of a pipeline gets about one core) when this
// process drives every stage — in this process (graphsplit.InOneProcess:
// what a cut sends costs nothing there), or in stage processes it starts
// and hands the cut — unless the resumed run in resumeDir ("": none)
// recorded one (rundir.RecordedCut), which it keeps. Stages on other
// hosts or under a launcher each build their own plan, so every process
// must cut alike without measuring: there cfg keeps the cost
// estimate's cut (pipemare plan -stages P measures one to pass as -cut).
// Stage processes whose transport tr is gRPC pay for every byte a cut
// sends (graphsplit.OverNetwork). It says on log how the stages were cut,
// unless the cut was given or recorded.
func ChooseCut(cfg *train.Config, where launch.Where, tr launch.Transport, resumeDir string, r zoo.Recipe, trainSet zoo.Data, log io.Writer) error {
	if cfg.Cut != nil || cfg.Stages == 0 {
		return nil
	}
	if resumeDir != "" {
		if cut := rundir.RecordedCut(resumeDir); cut != nil {
			cfg.Cut = cut
			return nil
		}
	}
	if where != launch.InProcess && where != launch.LocalProcs {
		fmt.Fprintf(log, "%d stages cut by the cost estimate, alike on every host (pipemare plan measures a balanced cut of %d stages, to give every host as the cut)\n", cfg.Stages, cfg.Stages)
		return nil
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var opts []graphsplit.Option
	if where == launch.InProcess {
		opts = append(opts, graphsplit.InOneProcess())
	}
	if where == launch.LocalProcs && tr == launch.TransportGRPC {
		opts = append(opts, graphsplit.OverNetwork())
	}
	cut, bal, err := train.Balanced(r.Build, trainSet, *cfg, opts...)
	if err != nil {
		return err
	}
	cfg.Cut = cut
	fmt.Fprintf(log, "%d stages cut at ops %s, balanced on this machine: %s\n", cfg.Stages, runspec.FormatCut(cut), bal)
	return nil
}
