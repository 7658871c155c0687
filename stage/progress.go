package stage

import "github.com/pipemare/pipemare/solvers"

// progressLog is what happened since the stage's previous answer.
type progressLog struct {
	events    []Event
	losses    []Loss
	delays    []Delay
	keptBytes int64 // activations kept now
}

// progress returns the stage's cumulative statistics and what happened
// since the previous call, which it forgets.
func (r *Runtime) progress() Progress {
	p := Progress{Stats: r.statsNow(), Events: r.log.events, Losses: r.log.losses, Delays: r.log.delays}
	r.log.events, r.log.losses, r.log.delays = nil, nil, nil
	return p
}

// statsNow is a copy of the stage's cumulative statistics.
func (r *Runtime) statsNow() Stats {
	s := r.stats
	s.Delays = copyHist(r.stats.Delays)
	s.BackwardLag = copyHist(r.stats.BackwardLag)
	s.StateBytes = solvers.StateBytes(r.cfg.Solver, r.stats.ParamBytes)
	s.CorrectionBytes = solvers.CorrectionBytes(r.cfg.Solver)
	return s
}

func copyHist(h map[int]int) map[int]int {
	out := make(map[int]int, len(h))
	for k, v := range h {
		out[k] = v
	}
	return out
}
