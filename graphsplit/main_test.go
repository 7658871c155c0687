package graphsplit

import (
	"testing"

	"go.uber.org/goleak"
	"gorgonia.org/tensor"
)

// importedBLAS is the BLAS the test binary had before TestMain called
// UseFastBLAS: what importing the package left in place.
var importedBLAS tensor.BLAS

// TestMain fails the package's tests if any goroutine outlives them. It
// computes with UseFastBLAS, the BLAS the engine's users train with
// (package train, the command).
func TestMain(m *testing.M) {
	importedBLAS = tensor.WhichBLAS()
	UseFastBLAS()
	goleak.VerifyTestMain(m)
}
