package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipemare/pipemare/internal/testkit/testutil"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/faultpoint"
)

// The tests that run pipemare as processes run this test binary as the
// command, without building it: with asMainEnv set, TestMain runs the
// program (mainCode) instead of the tests. train -procs starts its own
// executable as its stages, so its stages are the test binary too, and
// inherit the environment.
const asMainEnv = "PIPEMARE_TEST_AS_MAIN"

// killAtEnv makes a process run so SIGKILL itself when it reaches a
// fault point (package faultpoint): "<point>:<step>" (any stage) or
// "<point>:<step>:<stage>" (a stage, or "driver"), with the names of
// package faultpoint. With train -procs each stage process reaches the
// shard points of its own stage, and the driver the others; at the
// handshake's points (step 0) the stage is the peer on the other end.
const killAtEnv = "PIPEMARE_TEST_KILL_AT"

// stopAtEnv makes a process SIGSTOP itself at a fault point, as killAtEnv
// names it: a stalled process, which goes on when it gets SIGCONT.
const stopAtEnv = "PIPEMARE_TEST_STOP_AT"

// asMain is the test binary as the pipemare command, with the hook that
// killAtEnv or stopAtEnv asks for installed.
func asMain() int {
	var hooks []func(faultpoint.Point)
	for _, h := range []struct {
		env, name string
		sig       syscall.Signal
	}{{killAtEnv, "SIGKILL", syscall.SIGKILL}, {stopAtEnv, "SIGSTOP", syscall.SIGSTOP}} {
		spec := os.Getenv(h.env)
		if spec == "" {
			continue
		}
		parts := strings.Split(spec, ":")
		step, err := strconv.ParseInt(parts[1], 10, 64)
		stage, any := -1, len(parts) < 3
		if err == nil && !any && parts[2] != "driver" {
			stage, err = strconv.Atoi(parts[2])
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%s: %v\n", h.env, spec, err)
			return 3
		}
		var once sync.Once
		hooks = append(hooks, func(p faultpoint.Point) {
			if p.Name == parts[0] && p.Step == step && (any || p.Stage == stage) {
				once.Do(func() {
					fmt.Fprintf(os.Stderr, "test hook: %s at %s of step %d (stage %d)\n", h.name, p.Name, p.Step, p.Stage)
					// To this very thread: a signal to the process may be
					// taken by another thread while this one runs on.
					runtime.LockOSThread()
					_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), h.sig)
					runtime.UnlockOSThread()
				})
				if h.sig == syscall.SIGKILL {
					select {} // the signal is on its way
				}
			}
		})
	}
	if len(hooks) > 0 {
		faultpoint.Set(func(p faultpoint.Point) {
			for _, h := range hooks {
				h(p)
			}
		})
	}
	return mainCode()
}

// skipProcesses skips a test that starts processes in -short mode and
// under the race detector.
func skipProcesses(t *testing.T) {
	t.Helper()
	if testing.Short() || testutil.RaceEnabled {
		t.Skip("starts pipemare processes")
	}
}

// proc is a pipemare process of a test.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string // its standard output, line by line
	mu     sync.Mutex
	out    []string
	stderr testutil.SyncBuffer
	done   chan struct{}
	err    error
}

// start runs pipemare args with env added to the environment.
func start(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startWithFiles(t, nil, env, args...)
}

// startWithFiles is start with files inherited from file descriptor 3 on.
// It shares nothing between calls, so tests that run in parallel may call
// it.
func startWithFiles(t testing.TB, files []*os.File, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asMainEnv+"=1"), env...)
	cmd.ExtraFiles = files
	p := &proc{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for p to exit, at most within, and returns its exit code (−1
// for a signal) and its standard output and error.
func (p *proc) wait(t testing.TB, within time.Duration) (int, string, string) {
	t.Helper()
	go func() { // nobody reads the lines after this
		for range p.lines {
		}
	}()
	select {
	case <-p.done:
	case <-time.After(within):
		// SIGQUIT makes Go print every goroutine's stack on the standard
		// error: where the process waits.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("pipemare %v still running after %v (its goroutines, on SIGQUIT, at the end):\n%s", p.cmd.Args[1:], within, p.stderrText())
	}
	p.mu.Lock()
	out := strings.Join(p.out, "\n")
	p.mu.Unlock()
	return p.cmd.ProcessState.ExitCode(), out, p.stderrText()
}

func (p *proc) stderrText() string {
	return p.stderr.String()
}

// until reads p's output until a line matches re and returns the
// submatches, failing after within.
func (p *proc) until(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("pipemare exited before printing %q: %v\n%s", re, p.err, p.stderrText())
			}
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line %q within %v", re, within)
		}
	}
}

// pipemareRun runs pipemare args to its end and returns its output,
// failing unless it exits 0.
func pipemareRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	code, out, stderr := start(t, env, args...).wait(t, 5*time.Minute)
	require.Equal(t, 0, code, "pipemare %v:\n%s\n%s", args, out, stderr)
	return out
}

// reportOf reads the report.json of a train run.
func reportOf(t *testing.T, dir string) runReportJSON {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	var r runReportJSON
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

// runReportJSON is what the tests read of report.json.
type runReportJSON struct {
	Settings  map[string]any `json:"settings"`
	Placement struct {
		Where      string   `json:"where"`
		Launcher   string   `json:"launcher"`
		Transport  string   `json:"transport"`
		Addresses  []string `json:"addresses"`
		PIDs       []int    `json:"pids"`
		Hosts      [][]int  `json:"hosts"`
		PlacedBy   string   `json:"placed_by"`
		CPUs       []string `json:"cpus"`
		DriverCPUs string   `json:"driver_cpus"`
	} `json:"placement"`
	Resumed *struct {
		Checkpoint string `json:"checkpoint"`
		Step       int64  `json:"step"`
	} `json:"resumed"`
	Result struct {
		Epochs []struct {
			Losses   []float64 `json:"losses"`
			Accuracy float64   `json:"test_accuracy"`
		} `json:"epochs"`
		Accuracy      float64 `json:"final_accuracy"`
		ModelAccuracy float64 `json:"model_test_accuracy"`
		WeightsSHA256 string  `json:"weights_sha256"`
		Restarts      []struct {
			Stage       int    `json:"stage"`
			Reason      string `json:"reason"`
			Checkpoint  string `json:"checkpoint"`
			FromStep    int    `json:"from_step"`
			StepsRedone int    `json:"steps_redone"`
			TookNS      int64  `json:"took_ns"`
		} `json:"restarts"`
	} `json:"result"`
}

// gone reports whether process pid has ended (or is a zombie nobody
// reaps: its parent is dead).
func gone(pid int) bool {
	state, ok := procState(pid)
	return !ok || state == 'Z'
}

// requireCleanedUp checks that the stage processes pids (as the "started
// … (pids …)" line prints them) have exited and that they and their
// driver left nothing in tmp, their TMPDIR: no throw-away certificates.
func requireCleanedUp(t *testing.T, pids []string, tmp string) {
	t.Helper()
	for _, s := range pids {
		pid, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.True(t, gone(pid), "stage process %d has exited", pid)
	}
	requireEmptyDir(t, tmp)
}

// requireEmptyDir checks that the processes left nothing in tmp, their
// TMPDIR.
func requireEmptyDir(t *testing.T, tmp string) {
	t.Helper()
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "no temporary file is left behind (the throw-away certificates are removed)")
}

// stopped reports whether process pid is stopped (SIGSTOP).
func stopped(pid int) bool {
	state, ok := procState(pid)
	return ok && state == 'T'
}

// procState is the state letter of process pid in /proc (false: no such
// process).
func procState(pid int) (byte, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, false
	}
	return s[i+2], true
}
