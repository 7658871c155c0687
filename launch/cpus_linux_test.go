package launch

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/affinity"
)

// TestOwnCPU: stage process i gets CPU i of those this process may use,
// round robin.
func TestOwnCPU(t *testing.T) {
	allowed, err := affinity.Allowed()
	require.NoError(t, err)
	for i := range 2*len(allowed) + 1 {
		cpu, err := OwnCPU(i)
		require.NoError(t, err)
		require.Equal(t, allowed[i%len(allowed)], cpu, "stage %d", i)
	}
}

// TestPin: GOMAXPROCS follows the CPUs a process is pinned to, at least 2
// for a stage process over gRPC, unless the environment sets it; a CPU
// the process may not use is an error naming those it may.
func TestPin(t *testing.T) {
	allowed, err := affinity.Allowed()
	require.NoError(t, err)
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		require.NoError(t, affinity.PinProcess(allowed))
		runtime.GOMAXPROCS(procs)
	})
	t.Setenv("GOMAXPROCS", "")
	one := allowed[len(allowed)-1:]
	require.NoError(t, Pin(one, false))
	require.Equal(t, 1, runtime.GOMAXPROCS(0))
	now, err := affinity.Allowed()
	require.NoError(t, err)
	require.Equal(t, one, now)

	require.NoError(t, Pin(one, true))
	require.Equal(t, 2, runtime.GOMAXPROCS(0), "a stage process over gRPC has at least 2")
	require.NoError(t, Pin(allowed, true))
	require.Equal(t, max(2, len(allowed)), runtime.GOMAXPROCS(0))

	t.Setenv("GOMAXPROCS", "5")
	runtime.GOMAXPROCS(5)
	require.NoError(t, Pin(one, true))
	require.Equal(t, 5, runtime.GOMAXPROCS(0), "the environment's GOMAXPROCS stands")

	err = Pin([]int{1000}, false)
	require.ErrorContains(t, err, "affinity: pinning the process to CPUs 1000 (it may use ")
}
