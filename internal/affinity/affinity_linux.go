//go:build linux

package affinity

import (
	"os"
	"strconv"

	"github.com/pkg/errors"
	"golang.org/x/sys/unix"
)

// Allowed returns the CPUs the calling thread may run on, in increasing
// order.
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, errors.Wrap(err, "affinity: reading the CPUs this process may run on")
	}
	var cpus []int
	for c, n := 0, set.Count(); len(cpus) < n; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// maxCPU bounds the CPU numbers a unix.CPUSet holds.
const maxCPU = 1024

func setOf(cpus []int) (unix.CPUSet, error) {
	var set unix.CPUSet
	if len(cpus) == 0 {
		return set, errors.New("affinity: no CPUs to pin to")
	}
	for _, c := range cpus {
		if c < 0 || c >= maxCPU {
			return set, errors.Errorf("affinity: CPU %d is out of range", c)
		}
		set.Set(c)
	}
	return set, nil
}

// PinThread pins the calling OS thread to cpus. Lock the goroutine to its
// thread first (runtime.LockOSThread), or the pin lands on whatever thread
// the goroutine runs on now; and keep it locked until the goroutine ends
// (the runtime then retires the thread), or pin the thread back to what
// Allowed said before unlocking, so that no other goroutine inherits the
// pin.
func PinThread(cpus []int) error {
	set, err := setOf(cpus)
	if err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		allowed, _ := Allowed()
		return errors.Wrapf(err, "affinity: pinning a thread to CPUs %s (the process may use %s)", Format(cpus), Format(allowed))
	}
	return nil
}

// PinProcess pins every thread of the calling process to cpus — threads
// started later inherit it from the thread that starts them. GOMAXPROCS
// is the caller's to set (the runtime may lower it to len(cpus) on its
// own unless it was set). A CPU the system does not let the process use is
// an error naming the CPUs it may use.
func PinProcess(cpus []int) error {
	set, err := setOf(cpus)
	if err != nil {
		return err
	}
	// Threads may start while we pin the others: go over them until a
	// round finds no thread it had not pinned.
	pinned := map[int]bool{}
	for round := 0; round < 10; round++ {
		tids, err := threads()
		if err != nil {
			return err
		}
		fresh := false
		for _, tid := range tids {
			if pinned[tid] {
				continue
			}
			fresh = true
			if err := unix.SchedSetaffinity(tid, &set); err != nil {
				if errors.Is(err, unix.ESRCH) { // the thread ended
					continue
				}
				allowed, _ := Allowed()
				return errors.Wrapf(err, "affinity: pinning the process to CPUs %s (it may use %s)", Format(cpus), Format(allowed))
			}
			pinned[tid] = true
		}
		if !fresh {
			break
		}
	}
	return nil
}

// threads lists the calling process's thread ids.
func threads() ([]int, error) {
	d, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, errors.Wrap(err, "affinity: listing the process's threads")
	}
	tids := make([]int, 0, len(d))
	for _, e := range d {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
