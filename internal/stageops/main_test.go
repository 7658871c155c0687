package stageops

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	UseFastBLAS() // the BLAS the engine's users train with (package train, the command)
	goleak.VerifyTestMain(m)
}
