package asyncvm

import (
	"flag"
	"testing"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/recycle"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them. The
// tests run with the recycled tensors poisoned (recycle.Debug), so that a
// tensor used after it went back to the pools changes their results;
// benchmarks measure the pools as they are.
func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" {
		recycle.Debug(true)
	}
	graphsplit.UseFastBLAS() // the BLAS the engine's users train with (package train, the command)
	goleak.VerifyTestMain(m)
}
