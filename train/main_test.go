package train

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// training run stops its pipeline (the accuracy checks' child processes
// check their own runs the same way).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
