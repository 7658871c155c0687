package asyncvm

import (
	"context"
	"sync"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/stage"
	"github.com/pipemare/pipemare/schedule"
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
	return ServeStages(ctx, plan, []int{i}, []transport.Endpoint{ep}, opts...)
}

// ServeStages is ServeStage for a process that hosts several stages, each
// on its endpoint (eps, parallel to stages), each on goroutines of its
// own. Under a schedule that places several stages on a worker
// (schedule.NewTurns: Interleaved, ZBV), a process that hosts whole
// workers — every stage of each worker it serves one of, as the schedule
// places them (Schedule.WorkerOf) — runs each worker's stages in turn, in
// the worker's order, as one process does; otherwise its stages take no
// turns (what is trained is the same). It closes every endpoint, and
// returns when every stage has returned: nil when the driver stopped them
// all, else the first stage's error (in stages' order).
func ServeStages(ctx context.Context, plan *graphsplit.Plan, stages []int, eps []transport.Endpoint, opts ...Option) error {
	defer func() {
		for _, ep := range eps {
			ep.Close()
		}
	}()
	if len(stages) != len(eps) || len(stages) == 0 {
		return errors.Errorf("asyncvm: ServeStages: %d stages and %d endpoints; give one endpoint per stage", len(stages), len(eps))
	}
	cfg, err := newConfig(plan, opts)
	if err != nil {
		return err
	}
	hosted := make(map[int]bool, len(stages))
	for _, i := range stages {
		if i < 0 || i >= len(plan.Stages) {
			return errors.Errorf("asyncvm: ServeStage: no stage %d in a plan of %d", i, len(plan.Stages))
		}
		if hosted[i] {
			return errors.Errorf("asyncvm: ServeStages: stage %d given twice", i)
		}
		hosted[i] = true
	}
	gates := newTurns(cfg.sched, len(plan.Stages), cfg.n)
	if gates != nil && !wholeWorkers(cfg.sched, len(plan.Stages), hosted) {
		gates = nil // the workers' other stages run elsewhere: no turns
	}
	var runtimes []*stage.Runtime
	defer func() {
		for _, rt := range runtimes {
			rt.Close()
		}
	}()
	for _, i := range stages {
		sc, err := cfg.stageConfig(i)
		if err != nil {
			return errors.Wrapf(err, "asyncvm: stage %d", i)
		}
		sc.FirstOrderTimeout = DefaultFirstOrderTimeout
		if cfg.firstOrder > 0 {
			sc.FirstOrderTimeout = cfg.firstOrder
		}
		if gates != nil {
			sc.Turn = func(ctx context.Context, a schedule.Action, sched string) (func(), error) {
				return gates.wait(ctx, i, a, sched)
			}
		}
		restore := bnstate.Save(bnstate.Of(plan.Stages[i].Stateful)).Restore
		rt, err := stage.New(plan, i, sc)
		restore()
		if err != nil {
			return errors.Wrapf(err, "asyncvm: stage %d", i)
		}
		runtimes = append(runtimes, rt)
	}
	defer shareKernels(len(stages), cfg.sched)()
	errs := make([]error, len(runtimes))
	var wg sync.WaitGroup
	for j, rt := range runtimes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = rt.Serve(ctx, eps[j])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// wholeWorkers reports whether hosted holds every stage of each worker of
// s (on p stages) it holds one of.
func wholeWorkers(s schedule.Schedule, p int, hosted map[int]bool) bool {
	of := s.WorkerOf(p)
	for i := range p {
		for j := range p {
			if of(i) == of(j) && hosted[i] && !hosted[j] {
				return false
			}
		}
	}
	return true
}
