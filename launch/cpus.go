package launch

import (
	"os"
	"runtime"

	"github.com/pipemare/pipemare/internal/affinity"
)

// Pin pins this process — every thread, and so every thread started later
// — to cpus (as taskset does) and sets GOMAXPROCS to their number, or to
// at least 2 for a stage process whose links are gRPC's (grpcStage),
// unless the GOMAXPROCS environment variable sets it. gRPC's stage needs
// the second: with one, its transport's goroutines wait for the compute to
// block before they send or receive, and the stage's peers wait for its
// tensors. Over shared memory a stage writes its tensors into the ring
// itself, and a second P on the one CPU only costs it: the runtime's idle
// P spins and wakes beside the compute (docs/speed.md has the
// measurements of both). The caller calls it at start-up, before the
// pipeline runs. A CPU the system does not let the process use is an
// error naming the CPUs it may use; on systems other than Linux Pin
// fails with affinity's ErrUnsupported.
func Pin(cpus []int, grpcStage bool) error {
	if err := affinity.PinProcess(cpus); err != nil {
		return err
	}
	if os.Getenv("GOMAXPROCS") == "" {
		procs := len(cpus)
		if grpcStage {
			procs = max(2, procs)
		}
		runtime.GOMAXPROCS(procs)
	}
	return nil
}

// OwnCPU is the CPU that stage process i gets when each stage process of
// this host has one of its own: CPU i of those this process may use now,
// in increasing order, round robin (more stages than CPUs share them). The
// caller passes it to stage i, which pins itself with Pin.
func OwnCPU(i int) (int, error) {
	allowed, err := affinity.Allowed()
	if err != nil {
		return 0, err
	}
	return allowed[i%len(allowed)], nil
}
