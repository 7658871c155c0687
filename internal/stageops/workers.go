package stageops

import (
	"runtime"
	"sync/atomic"
)

// A stage that has a core to itself gains nothing from kernels that fan
// out over goroutines — parallel, and gonum's GEMM, which starts a
// goroutine per 64×64 block of its output — and loses to it: each kernel
// waits for its slowest chunk, which shares a core with another stage's
// compute or with the transport. SetWorkers bounds how many goroutines a
// kernel may use, process-wide; results never depend on it (every output
// element is computed in the same order whatever the chunking).

// maxWorkers is the bound SetWorkers set; 0: GOMAXPROCS.
var maxWorkers atomic.Int32

// SetWorkers bounds the goroutines a kernel of this process may run on to
// n (n ≤ 0: GOMAXPROCS, the default). A pipeline driver calls it with the
// CPUs per stage of the process; the last call wins.
func SetWorkers(n int) { maxWorkers.Store(int32(max(n, 0))) }

// workers is how many goroutines a kernel may use now.
func workers() int {
	if n := int(maxWorkers.Load()); n > 0 {
		return min(n, runtime.GOMAXPROCS(0))
	}
	return runtime.GOMAXPROCS(0)
}
