package delay

// Recorded replays the delays a real run recorded (asyncvm.VM.DelayLog
// with asyncvm.WithDelayLog), indexed [stage][microbatch].
type Recorded [][]int

// Delay returns the recorded delay (0 past the end of the record).
func (r Recorded) Delay(stage, micro int) int {
	if micro < len(r[stage]) && r[stage][micro] >= 0 {
		return r[stage][micro]
	}
	return 0
}

// Max returns the largest recorded delay of the stage.
func (r Recorded) Max(stage int) int {
	m := 0
	for _, d := range r[stage] {
		m = max(m, d)
	}
	return m
}

// Mean returns the mean recorded delay of the stage.
func (r Recorded) Mean(stage int) float64 {
	sum, n := 0, 0
	for _, d := range r[stage] {
		if d >= 0 {
			sum += d
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}
