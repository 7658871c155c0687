package schedule

import "fmt"

// Schedule says in which order each stage runs its forwards, backwards and
// updates, and which weights a backward reads. Every schedule runs in the
// same engine; schedules differ only in their action lists and in these
// two properties.
type Schedule struct {
	// Name is how the schedule is printed and looked up (ByName).
	Name string
	// Actions returns each stage's ordered action list for steps steps of
	// n microbatches on p stages. It is a pure function of its arguments,
	// and the lists for more steps extend the lists for fewer.
	Actions func(p, n, steps int) [][]Action
	// Async schedules never flush: forwards of the next step start before
	// the previous step's backwards are done, so a forward may read weights
	// several updates older than the ones its gradient is applied to.
	Async bool
	// StashWeights makes a backward read exactly the weights its forward
	// read (PipeDream's weight stashing: a stage keeps a copy of every
	// weight version a microbatch in flight read). Otherwise a backward
	// reads the stage's current weights, or what its solver supplies (T2).
	StashWeights bool
	// ForwardDelay, when 1, makes the forwards of step k read the weights
	// after update k−1 whenever they run (PipeDream-2BW's double
	// buffering), and their backwards the same: every gradient is applied
	// exactly one update late, and a stage keeps one weight copy. 0: the
	// forwards read the weights the stage has when they run.
	ForwardDelay int
	// PerWorker is v, the stages each worker hosts (0 means 1): the
	// schedule runs P stages on P/v workers, placed by Place. Its action
	// order is per worker (Workers); Actions is each stage's share of it.
	PerWorker int
	// Place maps stages to workers when PerWorker > 1.
	Place Placement
	// Workers returns each worker's ordered list of its stages' actions
	// for p stages (nil: one stage per worker, Actions's lists). A pure
	// function like Actions.
	Workers func(p, n, steps int) [][]Slot
	// Split schedules run every backward as its two halves, OpInput and,
	// later, OpWeight.
	Split bool
	// Formula is the closed form of the schedule's Measure for p stages,
	// n microbatches a step and steps steps, and whether it holds there
	// (nil: none is known). Measured agrees with it within 2 % where it
	// holds (a test checks every P and N of docs/schedules.md's table).
	Formula func(p, n, steps int) (Measure, bool)
	// fits says why the schedule cannot run p stages with n microbatches
	// a step beyond Check's general reasons ("": it can; nil: always).
	fits func(p, n int) string
}

// All lists every schedule, synchronous ones first.
func All() []Schedule {
	return []Schedule{
		Sequential(), GPipe(), OneFOneB(), ZBH1(), ZBH2(), Interleaved(2), ZBV(),
		PipeDream(), PipeDream2BW(), PipeMare(), PipeMareVirtual(2, Contiguous),
	}
}

// ByName returns the schedule with that name: one of All, or one of them
// placed on its workers otherwise (PlacedBy: pipemare-v2-v is PipeMare-V
// with its workers in a V), the name a run records.
func ByName(name string) (Schedule, bool) {
	for _, s := range All() {
		if s.Name == name {
			return s, true
		}
		for _, pl := range Placements() {
			if placed, ok := s.PlacedBy(pl); ok && placed.Name == name {
				return placed, true
			}
		}
	}
	return Schedule{}, false
}

// Names lists the names of All, for messages.
func Names() []string {
	var out []string
	for _, s := range All() {
		out = append(out, s.Name)
	}
	return out
}

// ShapeError says that a schedule cannot run on P stages with N
// microbatches per step.
type ShapeError struct {
	Schedule string
	P, N     int
	Reason   string
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("schedule %s cannot run %d stages with %d microbatches a step: %s", e.Schedule, e.P, e.N, e.Reason)
}

// Check reports whether s can run p stages with n microbatches per step:
// a *ShapeError if not.
func Check(s Schedule, p, n int) error {
	v := s.Virtual()
	switch {
	case p < 1 || n < 1:
		return &ShapeError{s.Name, p, n, "stages and microbatches must be positive"}
	case p%v != 0:
		return &ShapeError{s.Name, p, n, fmt.Sprintf("its workers host %d stages each, and %d is not a multiple of %d", v, p, v)}
	case n < MinN(s, p):
		return &ShapeError{s.Name, p, n, fmt.Sprintf("it needs at least %d microbatches a step", MinN(s, p))}
	case s.fits != nil:
		if why := s.fits(p, n); why != "" {
			return &ShapeError{s.Name, p, n, why}
		}
	}
	return nil
}

// Ahead is the number of forwards stage i of p runs before its first
// backward in the asynchronous schedules: 2(p−1−i)+1, the microbatches that
// enter the pipeline while one travels from stage i to the last stage and
// back.
func Ahead(p, i int) int { return 2*(p-1-i) + 1 }

// Delay is the PipeMare delay of stage i of p with n microbatches per step:
// τ_i = ceil((2(p−1−i)+1)/n) updates between the weights a forward reads
// and the weights its gradient is applied to (some microbatches see one
// less).
func Delay(p, n, i int) int { return (Ahead(p, i) + n - 1) / n }
