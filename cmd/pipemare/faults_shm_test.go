package main

import (
	"fmt"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/faultpoint"
)

// The fault matrix's cases over shared memory (-transport auto at
// loopback addresses): stages started by hand and train -stage-addrs
// driving them, every process on this host. A peer is named by its socket
// until it answered, then by its pid.

// shmSocket matches the socket of stage i of a pipeline over shared memory.
func shmSocket(i int) string { return fmt.Sprintf(`@pipemare-[0-9a-f]+-%d`, i) }

// faultShmStageNeverStarted: a driver and stage 0 whose stage 1 was never
// started name it and its socket; the driver says to give more
// -connect-timeout.
func faultShmStageNeverStarted(t *testing.T, c faultCase) {
	f := startFaultPipeline(t, shmLinks, [][]string{{}, nil}, faultNone, nil, nil)
	codes, errs := f.endedAll(t)
	for i, who := range []string{"driver", "stage 0"} {
		require.Equal(t, 1, codes[i], errs[i])
		require.Regexp(t, who+": "+regexp.QuoteMeta(faultNotConnected)+".*stage 1 at "+shmSocket(1)+` did not answer \(is it running, and given the same run\?\)`, errs[i])
	}
	require.Contains(t, errs[0], faultFlagHint)
}

// faultShmStageDies: stage 1 killed in the handshake, having read the
// driver's hello: the driver and stage 0 name it (its pid once it took
// the connection, else its socket).
func faultShmStageDies(t *testing.T, c faultCase) {
	kill := []string{killAtEnv + "=" + faultpoint.HelloReceived + ":0"}
	f := startFaultPipeline(t, shmLinks, faultBoth, [][]string{nil, kill}, nil, nil)
	codes, errs := f.endedAll(t)
	require.Equal(t, -1, codes[2], "stage 1 is killed: %s", errs[2])
	require.Contains(t, errs[2], "test hook: SIGKILL at "+faultpoint.HelloReceived)
	pid := f.stages[1].cmd.Process.Pid
	for i, who := range []string{"driver", "stage 0"} {
		require.Equal(t, 1, codes[i], errs[i])
		require.Regexp(t, fmt.Sprintf(`%s: .*(the handshake with stage 1 \(pid %d\)|stage 1 at %s did not answer)`, who, pid, shmSocket(1)), errs[i], "%s names the stage", who)
	}
}

// faultShmStageOfAnotherModel: a stage of another model refuses the
// first peer that dials it, saying why (the plans' fingerprints differ:
// transport.Identity.Check); the others were refused, were told by stage
// 0 that it gave up for that refusal, or found it gone.
func faultShmStageOfAnotherModel(t *testing.T, c faultCase) {
	f := startFaultPipeline(t, shmLinks, [][]string{{}, {"-model", "cnn"}}, faultNone, nil, nil)
	codes, errs := f.endedAll(t)
	require.Equal(t, 1, codes[2], errs[2])
	require.Regexp(t, `stage 1: refused a peer: (driver|stage 0) \(pid \d+\) cut the model differently: its plan fingerprint is [0-9a-f]+…, this peer's [0-9a-f]+…`, errs[2], "the stage of the other plan refuses the first peer that dials it")
	for i, who := range []string{"driver", "stage 0"} {
		require.Equal(t, 1, codes[i], errs[i])
		require.Regexp(t, who+`: (.*stage 1 \(pid \d+\) refused the handshake: .* cut the model differently|`+regexp.QuoteMeta(faultNotConnected)+`.*did not answer)`, errs[i])
	}
	require.Regexp(t, `stage 1 \(pid \d+\) refused the handshake: .*cut the model differently`, errs[0]+errs[1], "the first peer stage 1 refused says why")
}

// faultShmStageStalled: stage 1 stopped (SIGSTOP) in the handshake with
// the driver: the driver names it, by its pid, stalled; once it goes on,
// its own deadline has passed.
func faultShmStageStalled(t *testing.T, c faultCase) {
	stop := []string{stopAtEnv + "=" + faultpoint.HelloReceived + ":0:driver"}
	f := startFaultPipeline(t, shmLinks, faultBoth, [][]string{nil, stop}, nil, nil)
	stage1 := f.stages[1].cmd.Process.Pid
	code, stderr := ended(t, f.driver, f.began)
	require.Equal(t, 1, code, stderr)
	require.Regexp(t, fmt.Sprintf(`driver: %sstage 1 \(pid %d\) at %s took the connection but did not answer the handshake \(is it stalled`, regexp.QuoteMeta(faultNotConnected), stage1, shmSocket(1)), stderr, "the driver names the stalled stage")
	code, stderr = ended(t, f.stages[0], f.began)
	require.Equal(t, 1, code, stderr)
	require.Regexp(t, "stage 0: ", stderr)
	require.True(t, stopped(stage1), "stage 1 is still stopped, past the deadline")
	require.NoError(t, syscall.Kill(stage1, syscall.SIGCONT))
	code, stderr = ended(t, f.stages[1], time.Now())
	require.Equal(t, 1, code, "once it goes on, its own deadline has passed: %s", stderr)
	require.Contains(t, stderr, "stage 1: ")
	requireEmptyDir(t, f.tmp)
}

// faultTransportMismatch: a driver given -transport grpc and stages left
// to auto, which share memory at loopback addresses, never meet (neither
// reaches the other's listener; a stage's inherited TCP listener, unused
// over shared memory, may take the driver's connection and answer
// nothing): each names the transport it waited over and says to give
// every process the same -transport.
func faultTransportMismatch(t *testing.T, c faultCase) {
	f := startFaultPipeline(t, shmLinks, faultBoth, faultNone, c.mtls(), nil)
	codes, errs := f.endedAll(t)
	same := regexp.QuoteMeta(": give every process of the pipeline the same -transport and -stage-addrs")
	require.Equal(t, 1, codes[0], errs[0])
	require.Regexp(t, "driver: "+regexp.QuoteMeta(faultNotConnected)+".*stage \\d at 127\\.0\\.0\\.1:\\d+ did not (answer|complete the connection).*this process waited over gRPC \\(-transport grpc\\)"+same, errs[0])
	for i := range 2 {
		require.Equal(t, 1, codes[i+1], "stage %d: %s", i, errs[i+1])
		require.Regexp(t, fmt.Sprintf("stage %d: %s.*this process waited over shared memory \\(-transport auto\\)%s", i, regexp.QuoteMeta(faultNotConnected), same), errs[i+1])
	}
}
