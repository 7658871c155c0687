package asyncvm

import (
	"runtime"

	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/internal/stageops"
	"github.com/pipemare/pipemare/schedule"
)

// kernelWorkers is how many goroutines one kernel (a GEMM, a stage op) of
// this process may use while busy stages of this process run concurrently:
// the process's CPUs shared among them. A stage that has a core to itself
// runs its kernels on its own goroutine: gonum's GEMM would start a
// goroutine per block and wait for the slowest, which shares a core with
// another stage. The sequential schedule runs one stage at a time, which
// may have every CPU.
func kernelWorkers(stages int, s schedule.Schedule) int {
	cpus := runtime.GOMAXPROCS(0)
	if allowed, err := affinity.Allowed(); err == nil && len(allowed) > 0 {
		cpus = min(cpus, len(allowed))
	}
	if s.Name == schedule.Sequential().Name {
		return cpus
	}
	return max(1, cpus/stages)
}

// shareKernels sets the process's kernels' goroutines for stages busy at
// once (stageops.SetWorkers: results do not depend on it) and returns the
// function that gives them back their default.
func shareKernels(stages int, s schedule.Schedule) func() {
	stageops.SetWorkers(kernelWorkers(stages, s))
	return func() { stageops.SetWorkers(0) }
}
