package main

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/affinity"
	"github.com/pipemare/pipemare/launch"
)

// TestStageCPUsFollowItsTransport: a stage process pinned to one CPU
// (-cpus) runs one P over shared memory, whose stage writes its own
// tensors, and two over gRPC, whose transport's goroutines must run beside
// the compute; the driver's -cpus gives it one P either way.
func TestStageCPUsFollowItsTransport(t *testing.T) {
	allowed, err := affinity.Allowed()
	require.NoError(t, err)
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		require.NoError(t, affinity.PinProcess(allowed))
		runtime.GOMAXPROCS(procs)
	})
	t.Setenv("GOMAXPROCS", "")
	one := strconv.Itoa(allowed[len(allowed)-1])
	for _, c := range []struct {
		stage bool
		tr    launch.Transport
		want  int
	}{
		{true, launch.TransportShm, 1},
		{true, launch.TransportGRPC, 2},
		{false, launch.TransportGRPC, 1},
	} {
		cpu := cpuFlags{cpus: one, stage: c.stage}
		require.NoError(t, cpu.apply(c.tr))
		require.Equal(t, c.want, runtime.GOMAXPROCS(0), "stage %v over %v", c.stage, c.tr)
	}
}
