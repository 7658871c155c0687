package bench

import "time"

// probeSteps is the length of one repetition of Probe's loop, about 2 ms
// on this project's 2-core machine, and probeReps how many it times.
const (
	probeSteps = 6 << 20
	probeReps  = 5
)

// probeSink keeps Probe's result, so that the compiler keeps its loop.
var probeSink float64

// Probe times a fixed loop of dependent floating-point operations on the
// caller's goroutine — the same work every call, touching no memory —
// probeReps times, and returns the fastest: how fast this machine computes
// now, short interruptions (a preemption, the collector) left out. A
// bench runs it before each of its trainings (Bench.RunBench), so that it
// can say when the host's speed moved under it (a shared machine's other
// tenants), which the ratio of two runs cannot show. The caller should
// run nothing else meanwhile.
func Probe() time.Duration {
	fastest := time.Duration(1<<63 - 1)
	for range probeReps {
		start := time.Now()
		x := 1.0
		for range probeSteps {
			x = x*0.999999 + 1e-6
		}
		probeSink += x
		fastest = min(fastest, time.Since(start))
	}
	return fastest
}

// probeMoved is how much slower than its fastest the probe of a bench may
// run before the bench says that the machine's speed moved: its rounds'
// samples/s are then not comparable, and a round's speed-up only where
// the probes beside its two runs agree.
const probeMoved = 1.10
