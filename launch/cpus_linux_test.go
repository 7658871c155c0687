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

// TestPin: GOMAXPROCS follows the CPUs a process is pinned to, one P
// for one CPU, unless the environment sets it; a CPU the process may not
// use is an error naming those it may.
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
	require.NoError(t, Pin(one))
	require.Equal(t, 1, runtime.GOMAXPROCS(0))
	now, err := affinity.Allowed()
	require.NoError(t, err)
	require.Equal(t, one, now)
	require.NoError(t, Pin(allowed))
	require.Equal(t, len(allowed), runtime.GOMAXPROCS(0))

	t.Setenv("GOMAXPROCS", "5")
	runtime.GOMAXPROCS(5)
	require.NoError(t, Pin(one))
	require.Equal(t, 5, runtime.GOMAXPROCS(0), "the environment's GOMAXPROCS stands")

	err = Pin([]int{1000})
	require.ErrorContains(t, err, "affinity: pinning the process to CPUs 1000 (it may use ")
}

// TestServeOnOneP: a process of one P serving several stages over gRPC
// takes a second, whose idle turns poll the network; one stage, or
// shared memory, keeps one; the environment's GOMAXPROCS stands.
func TestServeOnOneP(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	t.Setenv("GOMAXPROCS", "")
	for _, c := range []struct {
		stages int
		tr     Transport
		want   int
	}{
		{2, TransportGRPC, 2},
		{1, TransportGRPC, 1},
		{2, TransportShm, 1},
	} {
		runtime.GOMAXPROCS(1)
		ServeOnOneP(c.stages, c.tr)
		require.Equal(t, c.want, runtime.GOMAXPROCS(0), "%d stages over %v", c.stages, c.tr)
	}
	t.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1)
	ServeOnOneP(2, TransportGRPC)
	require.Equal(t, 1, runtime.GOMAXPROCS(0), "the environment's GOMAXPROCS stands")
}
