package stageops

import (
	"sync"
	"sync/atomic"

	"github.com/pkg/errors"
)

// Kernels is a kernel mode: which order the float32 matrix products of the
// BLAS UseFastBLAS installs sum in.
type Kernels string

const (
	// Exact computes gonum's products bit for bit: each product and sum
	// rounded apart, in gonum's order. The default.
	Exact Kernels = "exact"
	// Fast sums each element's products in fused multiply-adds, in
	// increasing k, then adds alpha times the sum into C (sgemmFast): its
	// own fixed order, the same bits on any number of workers and any
	// host that runs it (AVX2 and FMA3), not gonum's.
	Fast Kernels = "fast"
)

// kernelsInUse is the mode the products compute in now, and how many
// holders (HoldKernels) want it.
var kernelsInUse struct {
	sync.Mutex
	mode  Kernels
	holds int
}

// fastNow is whether the products compute in the fast mode: what Sgemm
// reads, without a lock.
var fastNow atomic.Bool

// HoldKernels makes this process's float32 products compute in mode k
// until release is called, and refuses, naming both modes, while another
// holder holds the other mode: the BLAS is process-wide (gorgonia.Use), so
// two runs of one process compute in one mode at a time. It installs the
// BLAS (UseFastBLAS) first. The fast mode is refused where the CPU lacks
// AVX2 and FMA3, or in the openblas build, whose products are OpenBLAS's.
// With no holder the products compute in the exact mode. release may be
// called more than once.
func HoldKernels(k Kernels) (release func(), err error) {
	switch k {
	case Exact:
	case Fast:
		if !fastKernels() {
			return nil, errors.New("kernels fast needs a CPU with AVX2 and FMA3 and the default (pure Go) build; use kernels exact")
		}
	default:
		return nil, errors.Errorf("kernels %q: not a kernel mode (exact or fast)", string(k))
	}
	UseFastBLAS()
	m := &kernelsInUse
	m.Lock()
	defer m.Unlock()
	if m.holds > 0 && m.mode != k {
		return nil, errors.Errorf("kernels %s wanted while a run of this process computes with kernels %s (the BLAS is process-wide): run them one after the other, or in two processes", k, m.mode)
	}
	m.mode = k
	m.holds++
	fastNow.Store(k == Fast)
	var once sync.Once
	return func() {
		once.Do(func() {
			m.Lock()
			defer m.Unlock()
			if m.holds--; m.holds == 0 {
				m.mode = ""
				fastNow.Store(false)
			}
		})
	}, nil
}
