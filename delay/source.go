package delay

// Source says how many updates old the weights are that a stage's forward
// of a microbatch reads.
type Source interface {
	// Delay is called once per stage and microbatch, in increasing
	// microbatch order per stage; it is in [0, Max(stage)].
	Delay(stage, micro int) int
	// Mean is the expected delay of a stage (what a rescheduling solver is
	// told before the first step).
	Mean(stage int) float64
	// Max bounds the stage's delays: how many past weight versions the
	// stage keeps.
	Max(stage int) int
}
