package update

import "golang.org/x/sys/cpu"

// wide says whether the AVX loops can run.
var wide = cpu.X86.HasAVX

// momentum8 is Momentum's loop over the first n elements, n a positive
// multiple of 8 (update_amd64.s).
//
//go:noescape
func momentum8(w, grad, v *float32, n int, beta, negEta float32)

// velocity8 is Velocity's loop over the first n elements, n a positive
// multiple of 8; rest is 1 − γ.
//
//go:noescape
func velocity8(d, w, old *float32, n int, gamma, rest float32)

// shift8 is Shift's loop over the first n elements, n a positive multiple
// of 8.
//
//go:noescape
func shift8(dst, w, d *float32, n int, k float32)
