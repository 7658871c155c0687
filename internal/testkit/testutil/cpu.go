package testutil

import (
	"testing"
	"time"
)

// CPUMeter measures the CPU time (user and system, getrusage) this
// process spends over a benchmark's timed loop, both ends of a transport
// when they run in it.
type CPUMeter struct{ start time.Duration }

// StartCPU starts measuring.
func StartCPU() CPUMeter { return CPUMeter{start: processCPU()} }

// Report adds the CPU time spent since StartCPU per MiB of bytes moved to
// b's metrics, as cpu-ms/MiB.
func (m CPUMeter) Report(b *testing.B, bytes int64) {
	if bytes <= 0 {
		return
	}
	spent := processCPU() - m.start
	if spent == 0 {
		return
	}
	b.ReportMetric(float64(spent)/float64(time.Millisecond)/(float64(bytes)/(1<<20)), "cpu-ms/MiB")
}

// ReportPerOp adds the CPU time spent since StartCPU per iteration of b's
// loop to b's metrics, as cpu-ns/op: on a shared machine, less noisy than
// the wall time of ns/op.
func (m CPUMeter) ReportPerOp(b *testing.B) {
	if spent := processCPU() - m.start; spent > 0 && b.N > 0 {
		b.ReportMetric(float64(spent)/float64(b.N), "cpu-ns/op")
	}
}
