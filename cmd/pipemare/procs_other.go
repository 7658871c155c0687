//go:build !linux

package main

import "os/exec"

// ownChild does nothing where there is no Pdeathsig: a stage process whose
// driver vanished notices that its link broke and exits with an error.
func ownChild(*exec.Cmd) {}
