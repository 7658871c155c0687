//go:build !unix

package testutil

import "time"

// processCPU is 0 where getrusage is not available: no CPU metric.
func processCPU() time.Duration { return 0 }
