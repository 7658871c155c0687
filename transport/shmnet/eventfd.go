//go:build linux

package shmnet

import (
	"encoding/binary"
	"os"
	"syscall"
	"unsafe"

	"github.com/pkg/errors"
	"golang.org/x/sys/unix"
)

// An eventfd is one side's handle on an eventfd through which a ring's
// sides wake each other: signal adds one, wait takes the count, parking
// the goroutine in the runtime's poller while it is zero.
//
// Both are raw system calls, which the runtime does not see. The eventfd
// is non-blocking, so neither can block a thread; and a system call the
// runtime sees wakes its monitor thread (sysmon) when the process was
// idle, which then wakes every 20 µs for the next millisecond or more. A
// stage process of one P goes idle at every message it waits for, so its
// monitor never slowed down: 7,600 wake-ups in a 1.6 s MLP run, each on
// the CPU the stage is pinned to, in the compute's place (docs/speed.md).
type eventfd struct {
	f  *os.File
	rc syscall.RawConn // nil if f is not a usable file
}

func newEventfd(f *os.File) eventfd {
	rc, err := f.SyscallConn()
	if err != nil {
		rc = nil
	}
	return eventfd{f: f, rc: rc}
}

// signal adds one to the count: whoever waits wakes.
func (e eventfd) signal() error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	err := e.raw(e.rc.Write, unix.SYS_WRITE, b[:], false)
	// EAGAIN: the count is at its maximum, so whoever waits wakes anyway.
	if err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, unix.EAGAIN) {
		return errors.Wrap(err, "signalling the ring's eventfd")
	}
	return nil
}

// wait takes the count, waiting while it is zero.
func (e eventfd) wait() error {
	var b [8]byte
	return e.raw(e.rc.Read, unix.SYS_READ, b[:], true)
}

// raw makes the system call trap on b through op (the file's RawConn Read
// or Write, which hold the file open and, when the callback says so, wait
// for it to be ready); again says that EAGAIN means wait and try again.
func (e eventfd) raw(op func(func(fd uintptr) bool) error, trap uintptr, b []byte, again bool) error {
	if e.rc == nil {
		return os.ErrClosed
	}
	var errno syscall.Errno
	err := op(func(fd uintptr) bool {
		for {
			_, _, errno = unix.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			if errno != unix.EINTR {
				return !(again && errno == unix.EAGAIN)
			}
		}
	})
	if err == nil && errno != 0 {
		err = errno
	}
	return err
}
