package zoo

import (
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// training run stops its pipeline (the accuracy checks' child processes
// check their own runs the same way).
func TestMain(m *testing.M) {
	graphsplit.UseFastBLAS() // the BLAS the engine's users train with (package train, the command)
	goleak.VerifyTestMain(m)
}
