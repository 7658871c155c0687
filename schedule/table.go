package schedule

// Row is one schedule at one P and N of the replay table: what Measured
// gives beside the schedule's Formula.
type Row struct {
	Schedule          string
	P, N, Steps       int
	Measured, Formula Measure
	// Holds says the formula holds at this P and N (false also when the
	// schedule has none).
	Holds bool
}

// TableSteps is how many steps the table replays of s on p stages with n
// microbatches a step: one for a schedule that flushes every step (every
// step is the same), enough for the pipeline to fill and stay full
// otherwise (2 + ceil(4P/N)).
func TableSteps(s Schedule, p, n int) int {
	if flushes(s, p, n) {
		return 1
	}
	return 2 + (4*p+n-1)/n
}

// flushes reports whether s flushes every step.
func flushes(s Schedule, p, n int) bool {
	for _, list := range s.Actions(p, n, 1) {
		for _, a := range list {
			if a.Op == OpFlush {
				return true
			}
		}
	}
	return false
}

// Table replays every schedule of scheds at every P of ps and N of ns it
// can run (Check), for TableSteps steps, with EqualPasses times on one
// device per worker.
func Table(scheds []Schedule, ps, ns []int) []Row {
	var out []Row
	for _, s := range scheds {
		for _, p := range ps {
			for _, n := range ns {
				if Check(s, p, n) != nil {
					continue
				}
				steps := TableSteps(s, p, n)
				r := Row{Schedule: s.Name, P: p, N: n, Steps: steps, Measured: Measured(s, p, n, steps)}
				if s.Formula != nil {
					r.Formula, r.Holds = s.Formula(p, n, steps)
				}
				out = append(out, r)
			}
		}
	}
	return out
}
