package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/faultpoint"
)

// The fault matrix: a pipeline of the MLP cut into 2 stages, the stages
// started by hand and train -stage-addrs driving them (the README's
// walkthrough), or train -procs, where one process is missing, dies or
// stalls while the pipeline connects, or is refused. Every process ends
// within the connect deadline plus a margin, says why naming the peer and
// its address, and leaves no process and no temporary file behind.

// faultDeadline is the matrix's -connect-timeout: long enough for the
// healthy processes of a case to start and connect on a loaded machine
// (a stage process is serving well within a second: docs/testing.md),
// short enough to keep the matrix fast, as most cases wait it out.
const faultDeadline = 2 * time.Second

// faultMargin is what a process of the matrix may take beyond the
// deadline: its start-up (building the model), the refusal grace of a
// stage whose connecting failed (1 s) and its exit, on a loaded machine.
// A process that waited the 2-minute default, or forever, exceeds it.
const faultMargin = 12 * time.Second

// faultRunArgs are the run flags every process of the matrix is given.
var faultRunArgs = []string{"-model", "mlp", "-stages", "2", "-limit", "320", "-epochs", "2", "-test-limit", "200", "-connect-timeout", faultDeadline.String()}

// faultPipeline is one case's processes.
type faultPipeline struct {
	began  time.Time
	stages []*proc // nil for a stage not started
	driver *proc
	addrs  []string
	tmp    string // every process's TMPDIR
}

// startFaultPipeline starts stage i with faultRunArgs, the flags of its
// links (links: -transport grpc -certs DIR, or none: shared memory) and stage[i] (nil: stage i
// is not started), with stageEnv[i] in its environment, then the driver,
// train -stage-addrs with the same flags and driver after them, with
// driverEnv.
func startFaultPipeline(t *testing.T, links []string, stage, stageEnv [][]string, driver, driverEnv []string) *faultPipeline {
	t.Helper()
	f := &faultPipeline{began: time.Now(), tmp: t.TempDir()}
	tmpEnv := "TMPDIR=" + f.tmp
	args := make([][]string, len(stage))
	env := make([][]string, len(stage))
	for i := range stage {
		if stage[i] != nil {
			args[i] = append(append(slices.Clone(links), faultRunArgs...), stage[i]...)
		}
		env[i] = append([]string{tmpEnv}, stageEnv[i]...)
	}
	var addrs string
	f.stages, addrs = handStages(t, []string{"127.0.0.1", "127.0.0.1"}, args, env)
	f.addrs = strings.Split(addrs, ",")
	d := append(append(append([]string{"train", "-stage-addrs", addrs, "-out", filepath.Join(t.TempDir(), "out")}, links...), faultRunArgs...), driver...)
	f.driver = start(t, append([]string{tmpEnv}, driverEnv...), d...)
	return f
}

// ended waits for p to exit, at most until the deadline plus the margin
// from since, and returns its exit code and standard error.
func ended(t *testing.T, p *proc, since time.Time) (int, string) {
	t.Helper()
	code, _, stderr := p.wait(t, time.Until(since.Add(faultDeadline+faultMargin)))
	return code, stderr
}

// endedAll waits for the driver and every stage started, as ended does;
// codes and stderrs are the driver's first, then stage i's at i+1 (0 and ""
// for a stage not started). It checks that no process left a temporary
// file behind.
func (f *faultPipeline) endedAll(t *testing.T) ([]int, []string) {
	t.Helper()
	codes, stderrs := make([]int, 1+len(f.stages)), make([]string, 1+len(f.stages))
	for i, p := range append([]*proc{f.driver}, f.stages...) {
		if p != nil {
			codes[i], stderrs[i] = ended(t, p, f.began)
		}
	}
	requireEmptyDir(t, f.tmp)
	return codes, stderrs
}

// writeCerts writes a CA and the certificates of 2 stages on 127.0.0.1
// (pipemare certs -stages) into a new directory.
func writeCerts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, stderr := runCLI(context.Background(), "certs", "-out", dir, "-hosts", "127.0.0.1", "-stages", "2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "for the driver and 2 stages")
	return dir
}

// TestFaultMatrix: a stage never started, a stage killed in the middle of
// the handshake, the driver killed there, a driver with the certificate of
// another CA, a stage of another plan (-model, -stages) and a stage stalled
// (SIGSTOP) in the handshake for longer than the deadline: each process
// exits non-zero within the connect deadline plus a margin, the driver's
// error and the stages' name the peer at fault and its address, and
// nothing is left running or on disk. The same faults over shared memory
// (faults_shm_test.go) name the peer and its socket or pid.
func TestFaultMatrix(t *testing.T) {
	skipProcesses(t)
	c := faultCase{certs: writeCerts(t), other: writeCerts(t)}
	for _, f := range []struct {
		name string
		run  func(*testing.T, faultCase)
	}{
		{"stage never started", faultStageNeverStarted},
		{"stage dies during the handshake", faultStageDies},
		{"driver dies during the handshake", faultDriverDies},
		{"driver of another CA", faultDriverOfAnotherCA},
		{"stage of another model", faultStageOfAnotherModel},
		{"stage of another -stages", faultStageOfAnotherStages},
		{"stage stalled in the handshake", faultStageStalled},
		{"procs: stage dies during the handshake", faultProcsStageDies},
		{"shm: stage never started", faultShmStageNeverStarted},
		{"shm: stage dies during the handshake", faultShmStageDies},
		{"shm: stage of another model", faultShmStageOfAnotherModel},
		{"shm: stage stalled in the handshake", faultShmStageStalled},
		{"driver over gRPC, stages over shared memory", faultTransportMismatch},
	} {
		t.Run(f.name, func(t *testing.T) { f.run(t, c) })
	}
}

// faultCase is what the matrix's cases share: the certificates of the
// pipeline's CA, and another CA's.
type faultCase struct{ certs, other string }

// mtls are the flags of links over gRPC with mutual TLS (on loopback,
// -transport auto would share memory).
func (c faultCase) mtls() []string { return []string{"-transport", "grpc", "-certs", c.certs} }

// shmLinks are the flags of links over shared memory: none, -transport
// auto sharing memory between processes at loopback addresses, without
// credentials.
var shmLinks []string

// faultBoth starts both stages with no flags of their own
// (startFaultPipeline's stage); faultNone gives neither an environment of
// its own (its stageEnv).
var faultBoth, faultNone = [][]string{{}, {}}, [][]string{nil, nil}

// faultNotConnected begins the error of a process whose peers did not all
// connect within the deadline; faultFlagHint is what the driver's says of
// the deadline.
var (
	faultNotConnected = "not connected within " + faultDeadline.String() + " (the connect timeout): "
	faultFlagHint     = "-connect-timeout " + faultDeadline.String() + ": give more if the processes start further apart"
)

// faultStageNeverStarted: a driver and stage 0 whose stage 1 was never
// started name it and its address; the driver says to give more
// -connect-timeout.
func faultStageNeverStarted(t *testing.T, c faultCase) {
	f := startFaultPipeline(t, c.mtls(), [][]string{{}, nil}, faultNone, nil, nil)
	codes, errs := f.endedAll(t)
	require.Equal(t, 1, codes[0], errs[0])
	require.Contains(t, errs[0], "pipemare train: driver: "+faultNotConnected)
	require.Contains(t, errs[0], "stage 1 at "+f.addrs[1]+" did not answer (is it running, and is the address right?)")
	require.Contains(t, errs[0], "connection refused")
	require.Contains(t, errs[0], faultFlagHint)
	require.Equal(t, 1, codes[1], errs[1])
	require.Contains(t, errs[1], "stage 0: "+faultNotConnected)
	require.Contains(t, errs[1], "stage 1 at "+f.addrs[1]+" did not answer")
}

// faultStageDies: stage 1 killed in the handshake: the driver and
// stage 0 name it and its address.
func faultStageDies(t *testing.T, c faultCase) {
	kill := []string{killAtEnv + "=" + faultpoint.HelloReceived + ":0"}
	f := startFaultPipeline(t, c.mtls(), faultBoth, [][]string{nil, kill}, nil, nil)
	codes, errs := f.endedAll(t)
	require.Equal(t, -1, codes[2], "stage 1 is killed: %s", errs[2])
	require.Contains(t, errs[2], "test hook: SIGKILL at "+faultpoint.HelloReceived)
	for i, who := range []string{"driver", "stage 0"} {
		require.Equal(t, 1, codes[i], errs[i])
		require.Contains(t, errs[i], who+": "+faultNotConnected, "%s names its wait", who)
		require.Contains(t, errs[i], "stage 1 at "+f.addrs[1]+" did not answer", "%s names the stage and its address", who)
	}
}

// faultDriverDies: the driver killed in the handshake: each stage
// says its driver never connected, or that its stream broke.
func faultDriverDies(t *testing.T, c faultCase) {
	kill := []string{killAtEnv + "=" + faultpoint.HelloSent + ":0"}
	f := startFaultPipeline(t, c.mtls(), faultBoth, faultNone, nil, kill)
	codes, errs := f.endedAll(t)
	require.Equal(t, -1, codes[0], "the driver is killed: %s", errs[0])
	require.Contains(t, errs[0], "test hook: SIGKILL at "+faultpoint.HelloSent)
	for i := range 2 {
		require.Equal(t, 1, codes[i+1], "stage %d: %s", i, errs[i+1])
		// It never connected, or its stream broke.
		require.Regexp(t, fmt.Sprintf(`(?m)^pipemare stage: .*stage %d: .*(driver did not connect to stage %d|the stream to driver at \S+ broke)`, i, i), errs[i+1])
	}
}

// faultDriverOfAnotherCA: a driver with another CA's certificate
// fails the TLS handshake, and the stage it gave up on says it refused
// the certificate.
func faultDriverOfAnotherCA(t *testing.T, c faultCase) {
	f := startFaultPipeline(t, c.mtls(), faultBoth, faultNone, []string{"-certs", c.other}, nil)
	codes, errs := f.endedAll(t)
	require.Equal(t, 1, codes[0], errs[0])
	require.Regexp(t, `pipemare train: driver: stage \d at 127\.0\.0\.1:\d+: the TLS handshake failed: .*x509: certificate signed by unknown authority`, errs[0])
	tls := 0
	for i := range 2 {
		require.Equal(t, 1, codes[i+1], "stage %d: %s", i, errs[i+1])
		require.Contains(t, errs[i+1], fmt.Sprintf("stage %d: %sdriver did not connect to stage %d", i, faultNotConnected, i), "stage %d waited for its driver", i)
		if strings.Contains(errs[i+1], "the last connection refused: refused a connection from 127.0.0.1:") && strings.Contains(errs[i+1], "tls: ") {
			tls++
		}
	}
	require.NotZero(t, tls, "the stage the driver gave up on says it refused its certificate:\n%s", errs[1:])
}

// faultStageOfAnotherModel: a stage of another model refuses the
// first peer that dials it, saying why; the others were refused or found
// the stages gone.
func faultStageOfAnotherModel(t *testing.T, c faultCase) {
	f := startFaultPipeline(t, c.mtls(), [][]string{{}, {"-model", "cnn"}}, faultNone, nil, nil)
	codes, errs := f.endedAll(t)
	require.Equal(t, 1, codes[2], errs[2])
	require.Regexp(t, `stage 1: refused a peer: (driver|stage 0) at 127\.0\.0\.1:\d+ cut the model differently: its plan fingerprint is [0-9a-f]+…, this peer's [0-9a-f]+…`, errs[2], "the stage of the other plan refuses the first peer that dials it")
	// The others were refused, or found the stages gone: stage 0
	// exits once stage 1 refused it, often before the driver dials.
	for i, who := range []string{"driver", "stage 0"} {
		require.Equal(t, 1, codes[i], errs[i])
		require.Regexp(t, who+`: (.*stage \d at 127\.0\.0\.1:\d+ refused the handshake: .* cut the model differently|`+regexp.QuoteMeta(faultNotConnected)+`.*did not answer)`, errs[i])
	}
	require.Regexp(t, `stage 1 at \S+ refused the handshake: .*cut the model differently`, errs[0]+errs[1], "the first peer stage 1 refused says why")
}

// faultStageOfAnotherStages: a stage of another -stages is a command
// line that does not fit its plan (exit code 2: its 3 stages on the 2
// processes of -stage-addrs do not put stage 1 alone); the others name it.
func faultStageOfAnotherStages(t *testing.T, c faultCase) {
	f := startFaultPipeline(t, c.mtls(), [][]string{{}, {"-stages", "3"}}, faultNone, nil, nil)
	codes, errs := f.endedAll(t)
	require.Equal(t, 2, codes[2], "a command line that does not fit the plan: %s", errs[2])
	require.Contains(t, errs[2], "-stage 1: placed balanced, the 3 stages on 2 processes make processes of stages 0 or 1,2: give one of those")
	for i, who := range []string{"driver", "stage 0"} { // it was gone, or still building its model
		require.Equal(t, 1, codes[i], errs[i])
		require.Regexp(t, who+": "+regexp.QuoteMeta(faultNotConnected)+".*stage 1 at "+regexp.QuoteMeta(f.addrs[1])+" (did not answer|did not complete the connection)", errs[i])
	}
}

// faultStageStalled: stage 1 stopped (SIGSTOP) in the handshake:
// the driver and stage 0 name it stalled; once it goes on, its own
// deadline has passed.
func faultStageStalled(t *testing.T, c faultCase) {
	stop := []string{stopAtEnv + "=" + faultpoint.HelloReceived + ":0:driver"} // before it answers the driver
	f := startFaultPipeline(t, c.mtls(), faultBoth, [][]string{nil, stop}, nil, nil)
	stalled := `stage 1 at ` + regexp.QuoteMeta(f.addrs[1]) + ` (took the stream but did not answer the handshake|did not complete the connection) \(is it stalled`
	code, stderr := ended(t, f.driver, f.began)
	require.Equal(t, 1, code, stderr)
	require.Regexp(t, "driver: "+regexp.QuoteMeta(faultNotConnected)+stalled, stderr, "the driver names the stalled stage")
	// Stage 0 found stage 1 stalled too, or had its handshake with it
	// done and lost the driver when the driver gave up.
	code, stderr = ended(t, f.stages[0], f.began)
	require.Equal(t, 1, code, stderr)
	require.Regexp(t, "stage 0: ("+regexp.QuoteMeta(faultNotConnected)+".*"+stalled+"|lost the driver)", stderr)
	stage1 := f.stages[1].cmd.Process.Pid
	require.True(t, stopped(stage1), "stage 1 is still stopped, past the deadline")
	require.Contains(t, f.stages[1].stderrText(), "test hook: SIGSTOP at "+faultpoint.HelloReceived)
	require.NoError(t, syscall.Kill(stage1, syscall.SIGCONT))
	code, stderr = ended(t, f.stages[1], time.Now())
	require.Equal(t, 1, code, "once it goes on, its own deadline has passed: %s", stderr)
	// It answers the hello it had received: whichever it sees first, its
	// own deadline or the stream the driver closed when it gave up, names
	// the driver's link.
	require.Regexp(t, "stage 1: ("+regexp.QuoteMeta(faultNotConnected)+"|transport: link driver → stage 1 .*the stream to driver at 127\\.0\\.0\\.1:\\d+ broke)", stderr)
	requireEmptyDir(t, f.tmp)
}

// faultProcsStageDies: train -procs whose stage 1 is killed in
// the handshake says how the process ended, and leaves nothing behind.
func faultProcsStageDies(t *testing.T, c faultCase) {
	tmp := t.TempDir()
	kill := killAtEnv + "=" + faultpoint.HelloReceived + ":0:0" // stage 0's hello: stage 1's process only
	began := time.Now()
	p := start(t, []string{"TMPDIR=" + tmp, kill}, append([]string{"train", "-procs", "2", "-out", filepath.Join(t.TempDir(), "out")}, faultRunArgs...)...)
	m := p.until(t, regexp.MustCompile(`^started 2 stage processes on .* \(pids (\d+) (\d+)\)`), faultDeadline+faultMargin)
	code, stderr := ended(t, p, began)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "test hook: SIGKILL at "+faultpoint.HelloReceived+" of step 0 (stage 0)")
	// Before the driver's own handshake with it ("exited before the
	// pipeline was up"), during it (over shared memory: "the handshake
	// with stage 1 (pid …) broke off"), after ("unreachable": stage 1, or
	// stage 0, which exited once stage 1 died in its handshake, when the
	// driver found that first), or after the deadline passed on a loaded
	// machine: the driver says how each process ended.
	require.Regexp(t, `(?m)^pipemare train: .*(stage 1 exited before the pipeline was up \(signal: killed\)|the handshake with stage 1 \(pid `+m[2]+`\) broke off|stage [01] is unreachable|`+regexp.QuoteMeta(faultNotConnected)+`)`, stderr)
	require.Contains(t, stderr, "stage 1 (pid "+m[2]+"): signal: killed", "the driver says how its process ended")
	requireCleanedUp(t, m[1:], tmp)
}
