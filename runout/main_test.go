package runout

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// training stops its pipeline.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
