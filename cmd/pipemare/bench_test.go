package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchCNN is the benchmarks' run: the zoo CNN cut into 2 stages,
// PipeMare with T1 and T2, a synchronous warm-up epoch then an
// asynchronous one of 20 minibatches (4 × 16 rows).
var benchCNN = []string{"-model", "cnn", "-stages", "2", "-limit", "1280", "-epochs", "2", "-warmup", "20", "-test-limit", "100"}

// BenchmarkCNNPlacement trains benchCNN with its 2 stages in 2 processes
// each pinned to its own core (taskset, GOMAXPROCS=1; the driver beside
// stage 0 on core 0), and in one process pinned to one core and to both.
// Each reports the training's samples/s and wall time as the engine
// measured them (samples/s, wall-s: both epochs, evaluation left out),
// the asynchronous epoch's alone (async-samples/s), and the
// virtual-device replay of the run's measured actions beside them
// (virtual-samples/s, virtual-wall-s: one device per stage, free links). Run A and B interleaved on a quiet machine:
//
//	go test -run '^$' -bench 'CNNPlacement/procs' -benchtime 1x ./cmd/pipemare/
func BenchmarkCNNPlacement(b *testing.B) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		b.Skip("taskset (util-linux) pins the processes")
	}
	pin := func(cpus string) func(*exec.Cmd) {
		return func(c *exec.Cmd) {
			c.Args = append([]string{"taskset", "-c", cpus}, c.Args...)
			c.Path = taskset
		}
	}
	one := []string{"GOMAXPROCS=1"}
	b.Run("procs=2/pinned", func(b *testing.B) {
		for range b.N {
			var addrs []string
			var files []*os.File
			for range 2 {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(b, err)
				f, err := l.(*net.TCPListener).File()
				require.NoError(b, err)
				l.Close()
				addrs = append(addrs, l.Addr().String())
				files = append(files, f)
			}
			var stages []*proc
			for i, f := range files {
				beforeStart = func(c *exec.Cmd) { pin(strconv.Itoa(i))(c); c.ExtraFiles = []*os.File{f} }
				stages = append(stages, start(b, one, append([]string{"stage", "-stage", strconv.Itoa(i), "-stage-addrs", strings.Join(addrs, ","), "-listen", "fd:3", "-insecure"}, benchCNN...)...))
				f.Close()
			}
			beforeStart = pin("0")
			dir := b.TempDir()
			benchRun(b, one, dir, append([]string{"train", "-trace-steps", "1", "-stage-addrs", strings.Join(addrs, ","), "-insecure"}, benchCNN...))
			beforeStart = nil
			for _, s := range stages {
				code, _, stderr := s.wait(b, time.Minute)
				require.Equal(b, 0, code, stderr)
			}
		}
	})
	b.Run("procs=1/cores=1", func(b *testing.B) {
		beforeStart = pin("1")
		defer func() { beforeStart = nil }()
		for range b.N {
			benchRun(b, one, b.TempDir(), append([]string{"train"}, benchCNN...))
		}
	})
	b.Run("procs=1/cores=2", func(b *testing.B) {
		beforeStart = pin("0,1")
		defer func() { beforeStart = nil }()
		for range b.N {
			benchRun(b, []string{"GOMAXPROCS=2"}, b.TempDir(), append([]string{"train"}, benchCNN...))
		}
	})
}

// benchRun runs one training of the benchmark and reports its metrics.
func benchRun(b *testing.B, env []string, dir string, args []string) {
	b.Helper()
	code, out, stderr := start(b, env, append(args, "-out", dir)...).wait(b, 10*time.Minute)
	require.Equal(b, 0, code, "%s\n%s", out, stderr)
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(b, err)
	var r struct {
		Result struct {
			Epochs []struct {
				SamplesPerSec float64 `json:"samples_per_sec"`
			} `json:"epochs"`
			Virtual struct {
				Makespan      time.Duration `json:"makespan_ns"`
				SamplesPerSec float64       `json:"samples_per_sec"`
				PerStage      []float64     `json:"per_stage_utilization"`
			} `json:"virtual_devices"`
			Report struct {
				Wall          time.Duration `json:"wall_ns"`
				SamplesPerSec float64       `json:"samples_per_sec"`
			} `json:"report"`
		} `json:"result"`
	}
	require.NoError(b, json.Unmarshal(raw, &r))
	res := r.Result
	require.Len(b, res.Epochs, 2)
	b.ReportMetric(res.Epochs[1].SamplesPerSec, "async-samples/s")
	b.ReportMetric(res.Virtual.SamplesPerSec, "virtual-samples/s")
	b.ReportMetric(res.Virtual.Makespan.Seconds(), "virtual-wall-s")
	for i, u := range res.Virtual.PerStage { // how balanced the cut is
		b.ReportMetric(u, fmt.Sprintf("virtual-util-stage%d", i))
	}
	b.ReportMetric(res.Report.SamplesPerSec, "samples/s")
	b.ReportMetric(res.Report.Wall.Seconds(), "wall-s")
}
