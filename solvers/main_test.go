package solvers_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the tape
// machines are closed).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
