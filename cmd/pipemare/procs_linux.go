package main

import (
	"os/exec"
	"syscall"
)

// ownChild makes cmd a stage process this one owns: it dies with this
// process, even when this one is killed with SIGKILL (Pdeathsig), and it
// has its own process group, so that a Ctrl-C in the terminal reaches
// only the driver, which then stops its stages in order.
func ownChild(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
