package asyncvm

import (
	"context"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/stage"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
)

// ServeStage runs stage i of plan on ep, this process's endpoint of a
// network transport (grpcnet.Open with transport.Peer(i)), until the
// driver stops it or the pipeline fails: what a stage process does. plan
// and opts must be the driver's (every process builds the same model and
// splits it the same way; the transport's handshake compares the plans'
// fingerprints). It closes ep, and returns nil when the driver stopped it;
// otherwise the stage's own failure, or why it lost its driver (the link
// broke, no first order came within WithFirstOrderTimeout, ctx ended),
// naming the stage.
func ServeStage(ctx context.Context, plan *graphsplit.Plan, i int, ep transport.Endpoint, opts ...Option) error {
	defer ep.Close()
	cfg, err := newConfig(plan, opts)
	if err != nil {
		return err
	}
	if i < 0 || i >= len(plan.Stages) {
		return errors.Errorf("asyncvm: ServeStage: no stage %d in a plan of %d", i, len(plan.Stages))
	}
	sc, err := cfg.stageConfig(i)
	if err != nil {
		return errors.Wrapf(err, "asyncvm: stage %d", i)
	}
	sc.FirstOrderTimeout = DefaultFirstOrderTimeout
	if cfg.firstOrder > 0 {
		sc.FirstOrderTimeout = cfg.firstOrder
	}
	restore := bnstate.Save(bnstate.Of(plan.Stages[i].Stateful)).Restore
	rt, err := stage.New(plan, i, sc)
	restore()
	if err != nil {
		return errors.Wrapf(err, "asyncvm: stage %d", i)
	}
	defer rt.Close()
	defer shareKernels(1, cfg.sched)()
	return rt.Serve(ctx, ep)
}
