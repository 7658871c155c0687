package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
// fault point of the checkpoint package: "<point>:<step>" (any stage) or
// "<point>:<step>:<stage>", with the names of package faultpoint. With
// train -procs each stage process reaches the shard points of its own
// stage, and the driver the others.
const killAtEnv = "PIPEMARE_TEST_KILL_AT"

// asMain is the test binary as the pipemare command, with the kill hook
// killAtEnv asks for installed.
func asMain() int {
	if spec := os.Getenv(killAtEnv); spec != "" {
		parts := strings.Split(spec, ":")
		step, err := strconv.ParseInt(parts[1], 10, 64)
		stage := -1
		if err == nil && len(parts) > 2 {
			stage, err = strconv.Atoi(parts[2])
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%s: %v\n", killAtEnv, spec, err)
			return 3
		}
		faultpoint.Set(func(p faultpoint.Point) {
			if p.Name == parts[0] && p.Step == step && (stage < 0 || p.Stage == stage) {
				fmt.Fprintf(os.Stderr, "test hook: SIGKILL at %s of step %d (stage %d)\n", p.Name, p.Step, p.Stage)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		})
	}
	return mainCode()
}

// skipProcesses skips a test that starts processes in -short mode and
// under the race detector.
func skipProcesses(t *testing.T) {
	t.Helper()
	if testing.Short() || raceEnabled {
		t.Skip("starts pipemare processes")
	}
}

// beforeStart, when set, adjusts the next process start starts.
var beforeStart func(*exec.Cmd)

// proc is a pipemare process of a test.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string // its standard output, line by line
	mu     sync.Mutex
	out    []string
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// start runs pipemare args with env added to the environment.
func start(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asMainEnv+"=1"), env...)
	if beforeStart != nil {
		beforeStart(cmd)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: &p.stderr}
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
		t.Fatalf("pipemare %v still running after %v:\n%s", p.cmd.Args[1:], within, p.stderrText())
	}
	p.mu.Lock()
	out := strings.Join(p.out, "\n")
	p.mu.Unlock()
	return p.cmd.ProcessState.ExitCode(), out, p.stderrText()
}

func (p *proc) stderrText() string {
	w := p.cmd.Stderr.(*lockedWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
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
		Where     string   `json:"where"`
		Launcher  string   `json:"launcher"`
		Transport string   `json:"transport"`
		Addresses []string `json:"addresses"`
		PIDs      []int    `json:"pids"`
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
	} `json:"result"`
}

// gone reports whether process pid has ended (or is a zombie nobody
// reaps: its parent is dead).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}
