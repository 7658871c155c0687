//go:build !amd64

package tensorutil

// wideFinite: no vector loop on this architecture.
const wideFinite = false

func orExponents32(d []float32) uint32 { panic("tensorutil: orExponents32 without its kernel") }

// wideAdd: no vector loop on this architecture.
const wideAdd = false

func addF32(d, x []float32) { panic("tensorutil: addF32 without its kernel") }
