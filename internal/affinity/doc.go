// Package affinity pins a process, or one of its threads, to CPUs: what
// taskset does, from inside the program (sched_setaffinity through
// golang.org/x/sys/unix), so that a pipeline's stage processes can each own
// a core without a wrapper command.
//
// PinProcess pins every thread of the calling process, and so every thread
// it starts afterwards (a new thread inherits its creator's affinity); the
// caller sets GOMAXPROCS to suit. PinThread pins only the calling OS thread: the caller
// locks its goroutine to that thread first (runtime.LockOSThread).
// Allowed lists the CPUs the process may run on now. On systems other than
// Linux every function returns ErrUnsupported.
package affinity
