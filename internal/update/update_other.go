//go:build !amd64

package update

// wide: no vector loops on this architecture.
const wide = false

func momentum8(w, grad, v *float32, n int, beta, negEta float32) {
	panic("update: momentum8 without its kernel")
}

func velocity8(d, w, old *float32, n int, gamma, rest float32) {
	panic("update: velocity8 without its kernel")
}

func shift8(dst, w, d *float32, n int, k float32) { panic("update: shift8 without its kernel") }
