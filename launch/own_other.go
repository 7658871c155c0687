//go:build !linux

package launch

import "os/exec"

// OwnChild does nothing where there is no Pdeathsig: a stage process whose
// driver vanished notices that its links broke and exits with an error.
// (On Linux it makes cmd die with this process; see own_linux.go.)
func OwnChild(*exec.Cmd) {}
