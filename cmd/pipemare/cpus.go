package main

import (
	"flag"
	"strconv"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/launch"
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

// apply pins the process to -cpus, if given, and sets GOMAXPROCS to suit
// (launch.Pin: for a stage process at least 2).
func (c *cpuFlags) apply() error {
	if c.cpus == "" {
		return nil
	}
	cpus, err := affinity.Parse(c.cpus)
	if err != nil {
		return usageErr{errors.Wrap(err, "-cpus")}
	}
	return errors.Wrapf(launch.Pin(cpus, c.stage), "-cpus %s", c.cpus)
}

// stageCPUs is the -cpus of stage process i under -pin: a CPU of its own
// (launch.OwnCPU); "" without -pin, or when this process's CPUs cannot be
// read.
func (c *cpuFlags) stageCPUs(i int) string {
	if !c.pin {
		return ""
	}
	cpu, err := launch.OwnCPU(i)
	if err != nil {
		return ""
	}
	return strconv.Itoa(cpu)
}
