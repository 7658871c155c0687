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
	s := r.stats.Clone()
	s.StateBytes = solvers.StateBytes(r.cfg.Solver, r.stats.ParamBytes)
	s.CorrectionBytes = solvers.CorrectionBytes(r.cfg.Solver)
	return s
}

// Clone returns a copy of s that shares no map with it; its histograms
// are never nil (a stage counts into them, and a decoded message may carry
// none).
func (s Stats) Clone() Stats {
	s.Delays, s.BackwardLag, s.SharedDelays = copyHist(s.Delays), copyHist(s.BackwardLag), copyHist(s.SharedDelays)
	return s
}

func copyHist(h map[int]int) map[int]int {
	out := make(map[int]int, len(h))
	for k, v := range h {
		out[k] = v
	}
	return out
}
