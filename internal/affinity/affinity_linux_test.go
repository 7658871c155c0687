//go:build linux

package affinity

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// threadCPUs reads every thread's allowed CPUs from /proc.
func threadCPUs(t *testing.T) map[string]string {
	d, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range d {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				out[e.Name()] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

// TestPinProcessPinsEveryThread pins the test process to its last allowed
// CPU: every thread, existing and new, may run only there; pinning back
// restores the whole set.
func TestPinProcessPinsEveryThread(t *testing.T) {
	all, err := Allowed()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	procs := runtime.GOMAXPROCS(0)
	defer func() {
		require.NoError(t, PinProcess(all))
		runtime.GOMAXPROCS(procs)
		for tid, cpus := range threadCPUs(t) {
			require.Equal(t, Format(all), cpus, "thread %s after pinning back", tid)
		}
	}()
	one := all[len(all)-1:]
	require.NoError(t, PinProcess(one))
	done := make(chan struct{})
	go func() { // a goroutine on a thread of its own starts after the pin
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		close(done)
	}()
	<-done
	for tid, cpus := range threadCPUs(t) {
		require.Equal(t, Format(one), cpus, "thread %s", tid)
	}
	got, err := Allowed()
	require.NoError(t, err)
	require.Equal(t, one, got)

	require.ErrorContains(t, PinProcess([]int{maxCPU + 1}), "out of range")
	require.ErrorContains(t, PinProcess(nil), "no CPUs")
}

// TestPinThreadPinsOnlyItsThread: a locked goroutine's thread is pinned,
// the process's other threads are not; the goroutine ends locked, so the
// runtime retires the pinned thread.
func TestPinThreadPinsOnlyItsThread(t *testing.T) {
	all, err := Allowed()
	require.NoError(t, err)
	if len(all) < 2 {
		t.Skip("one CPU: a pinned thread looks like any other")
	}
	type seen struct {
		mine []int
		err  error
	}
	out := make(chan seen)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		err := PinThread(all[:1])
		mine, _ := Allowed()
		out <- seen{mine, err}
	}()
	s := <-out
	require.NoError(t, s.err)
	require.Equal(t, all[:1], s.mine)
	got, err := Allowed()
	require.NoError(t, err)
	require.Equal(t, all, got, "the test's own thread is not pinned")
}
