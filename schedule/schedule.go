package schedule

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
}

// All lists every schedule, synchronous ones first.
func All() []Schedule {
	return []Schedule{Sequential(), GPipe(), OneFOneB(), PipeDream(), PipeDream2BW(), PipeMare()}
}

// ByName returns the schedule with that name.
func ByName(name string) (Schedule, bool) {
	for _, s := range All() {
		if s.Name == name {
			return s, true
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
