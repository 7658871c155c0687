package launch

import (
	"os"
	"runtime"

	"github.com/pipemare/pipemare/internal/affinity"
)

// Pin pins this process — every thread, and so every thread started later
// — to cpus (as taskset does) and sets GOMAXPROCS to their number, unless
// the GOMAXPROCS environment variable sets it. A stage process pinned to
// one CPU so runs one P: a second one's thread would spin beside the
// compute on that CPU and take its time, while the transports hand their
// work over without it (shmnet writes the ring in the caller, grpcnet
// yields to its writers after a send on one P; docs/speed.md has the
// measurements). The caller calls it at start-up, before the pipeline
// runs. A CPU the system does not let the process use is an error naming
// the CPUs it may use; on systems other than Linux Pin fails with
// affinity's ErrUnsupported.
func Pin(cpus []int) error {
	if err := affinity.PinProcess(cpus); err != nil {
		return err
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(len(cpus))
	}
	return nil
}

// ServeOnOneP readies a process of one P (Pin's, on one CPU) to serve
// stages stages over transport tr: with several over gRPC it takes a
// second P. Go polls the network only when a P has nothing else to run
// (or every 10 ms), so with several stages computing on the one P gRPC's
// readers would wait, and the peers with them (docs/speed.md). Over
// shared memory a reader blocks in a system call, whose return takes the
// next turn, and one P stays best. It leaves an environment's GOMAXPROCS,
// and a process of more Ps, as they are.
func ServeOnOneP(stages int, tr Transport) {
	if stages > 1 && tr == TransportGRPC && runtime.GOMAXPROCS(0) == 1 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
	}
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
