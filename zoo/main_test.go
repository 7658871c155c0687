package zoo

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// training run, also the concurrent ones of the accuracy checks, stops its
// pipeline.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
