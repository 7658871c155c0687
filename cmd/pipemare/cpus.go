package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/pipemare/pipemare/internal/affinity"
)

// cpuFlags place a process on CPUs: -cpus pins the process itself (train,
// stage), and train's -pin gives each of -procs's stage processes a CPU of
// its own.
type cpuFlags struct {
	cpus  string
	pin   bool
	stage bool // the flags of a stage process
}

func (c *cpuFlags) register(fs *flag.FlagSet, stage bool) {
	c.stage = stage
	fs.StringVar(&c.cpus, "cpus", "", "run this process on these CPUs only, like 1 or 0-3 (sched_setaffinity, as taskset does)")
	if !stage {
		fs.BoolVar(&c.pin, "pin", false, "with -procs: pin stage process i to CPU i of those this process may use (round robin); see docs/speed.md for when to")
	}
}

// apply pins the process to -cpus, if given. GOMAXPROCS follows the CPUs —
// for a stage process at least 2, unless the GOMAXPROCS environment
// variable sets it: with one, the transport's goroutines wait for the
// compute to block before they send or receive, and a stage waits for its
// peers' tensors (docs/speed.md has the measurements).
func (c *cpuFlags) apply() error {
	if c.cpus == "" {
		return nil
	}
	cpus, err := affinity.Parse(c.cpus)
	if err != nil {
		return usageErr{fmt.Errorf("-cpus: %v", err)}
	}
	if err := affinity.PinProcess(cpus); err != nil {
		return fmt.Errorf("-cpus %s: %w", c.cpus, err)
	}
	if os.Getenv("GOMAXPROCS") == "" {
		procs := len(cpus)
		if c.stage {
			procs = max(2, procs)
		}
		runtime.GOMAXPROCS(procs)
	}
	return nil
}

// stageCPUs is the -cpus of stage process i of n under -pin: CPU i of
// those this process may use, round robin ("" without -pin).
func (c *cpuFlags) stageCPUs(i int) (string, error) {
	if !c.pin {
		return "", nil
	}
	allowed, err := affinity.Allowed()
	if err != nil {
		return "", fmt.Errorf("-pin: %w", err)
	}
	return affinity.Format(allowed[i%len(allowed) : i%len(allowed)+1]), nil
}
