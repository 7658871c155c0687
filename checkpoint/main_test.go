package checkpoint

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// crashRootEnv makes the test binary a checkpoint writer that runs until
// it is killed (TestSIGKILL).
const crashRootEnv = "PIPEMARE_CHECKPOINT_CRASH_ROOT"

func TestMain(m *testing.M) {
	if root := os.Getenv(crashRootEnv); root != "" {
		writeUntilKilled(root)
	}
	goleak.VerifyTestMain(m)
}
