package launch

import (
	"os/exec"
	"syscall"
)

// OwnChild makes cmd, before it starts, a child process this one owns: it
// gets SIGKILL when the OS thread that started it ends — with this
// process, even when this one is killed with SIGKILL (Pdeathsig) — and it
// has a process group of its own, so that a Ctrl-C in the terminal reaches
// only this process, which then stops its children in order. It replaces
// cmd.SysProcAttr. Since Pdeathsig follows the thread, start cmd on a
// thread that outlives the child: from a goroutine locked to its OS thread
// (runtime.LockOSThread) that stays locked and alive until the child has
// exited, as StartLocal does (the runtime ends the thread of a goroutine
// that exits locked), or that unlocks only after the child has exited.
// Where there is no Pdeathsig (systems other than Linux) it does nothing: a
// child whose parent vanished must notice by itself (a stage: its links
// break).
func OwnChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
