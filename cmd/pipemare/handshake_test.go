package main

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/train"
	"github.com/pipemare/pipemare/zoo"
)

// TestStageWithOtherSettingsIsRefused: a stage process started with
// another run setting than its driver's is refused at the handshake, the
// error naming the setting's flag and both resolved values (the driver's
// the recipe's), and both processes exit non-zero — for every setting of
// the spec that reaches a stage (runspec.Spec.Settings; runspec's tests
// check that the list is whole). One short-lived process pair per
// setting: the MLP in one stage, over shared memory (the handshake
// compares the same identity over either transport: transport.Identity).
func TestStageWithOtherSettingsIsRefused(t *testing.T) {
	skipProcesses(t)
	run := []string{"-model", "mlp", "-stages", "1", "-limit", "320", "-epochs", "2", "-test-limit", "100", "-insecure", "-connect-timeout", "30s"}
	here := resolved(t, runspec.Spec{Model: "mlp", Stages: "1", Limit: 320, Epochs: 2, TestLimit: 100})
	cases := []struct{ flag, value, there string }{
		{"-lr", "0.2", "0.2"},
		{"-microbatches", "2", "2"},
		{"-seed", "9", "9"},
		{"-t1", "3", "3"},
		{"-t2", "0.5", "0.5"},
		{"-method", "naive", "naive"},
		{"-model", "cnn", "cnn"},
		{"-schedule", "gpipe", "gpipe"},
		{"-microbatch", "8", "8"},
		{"-epochs", "3", "3"},
		{"-momentum", "0.5", "0.5"},
		{"-cosine=false", "", "false"},
		{"-step-decay", "", "true"},
		{"-warmup", "2", "2"},
		{"-stash", "", "true"},
		{"-limit", "256", "256"},
		{"-kernels", "fast", "fast"},
		{"-placement", "contiguous", "contiguous"},
	}
	for _, c := range cases {
		t.Run(c.flag, func(t *testing.T) {
			t.Parallel() // each case its own processes and listeners; they mostly wait
			stage := append(slices.Clone(run), c.flag)
			if c.value != "" {
				stage = append(stage, c.value)
			}
			ps, addrs := handStages(t, []string{"127.0.0.1"}, [][]string{stage}, nil)
			driver := start(t, nil, append([]string{"train", "-stage-addrs", addrs, "-out", t.TempDir()}, run...)...)
			name := regexp.QuoteMeta(flagOf(settingOf(c.flag)))
			there, here := regexp.QuoteMeta(c.there), regexp.QuoteMeta(here[settingOf(c.flag)])
			// Whichever peer refuses the other first says so, and the
			// other passes it on.
			refused := `runs with another ` + name + `: (` + there + ` there, ` + here + ` here|` + here + ` there, ` + there + ` here)`
			if c.flag == "-model" || c.flag == "-microbatch" { // another model, or other shapes, is another plan, which the handshake compares first
				refused = "cut the model differently"
			}
			code, _, stderr := driver.wait(t, time.Minute)
			require.NotEqual(t, 0, code, "the driver must fail: %s", stderr)
			require.Regexp(t, `^pipemare train: driver: stage 0 `+peerAt+` .*`+refused, stderr)
			code, _, stderr = ps[0].wait(t, time.Minute)
			require.NotEqual(t, 0, code, "the stage must fail: %s", stderr)
			require.Regexp(t, `^pipemare stage: .*driver `+peerAt+` .*`+refused, stderr)
		})
	}
	var settings []string
	for _, s := range (runspec.Spec{}).Settings() {
		settings = append(settings, flagOf(s.Name))
	}
	var tested []string
	for _, c := range cases {
		tested = append(tested, flagOf(settingOf(c.flag)))
	}
	require.ElementsMatch(t, settings, tested, "a case for every setting that reaches a stage")
}

// TestStageGivenTheRecipesValuesIsAccepted: a stage process given, as
// flags, the values its driver takes from the recipe runs the same
// settings, and the run trains to the end.
func TestStageGivenTheRecipesValuesIsAccepted(t *testing.T) {
	skipProcesses(t)
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	run := []string{"-model", "mlp", "-stages", "1", "-limit", "320", "-epochs", "2", "-test-limit", "100", "-insecure", "-connect-timeout", "30s"}
	stage := append(slices.Clone(run), "-lr", fmt.Sprint(r.Run.LR), "-seed", fmt.Sprint(r.Run.Seed), "-method", r.Method, "-microbatches", fmt.Sprint(r.Run.Microbatches))
	ps, addrs := handStages(t, []string{"127.0.0.1"}, [][]string{stage}, nil)
	driver := start(t, nil, append([]string{"train", "-stage-addrs", addrs, "-out", t.TempDir()}, run...)...)
	code, _, stderr := driver.wait(t, time.Minute)
	require.Equal(t, 0, code, "the driver: %s", stderr)
	code, _, stderr = ps[0].wait(t, time.Minute)
	require.Equal(t, 0, code, "the stage: %s", stderr)
}

// resolved are the settings a run of spec resolves to, by name
// (train.Resolved), as the handshake compares them.
func resolved(t *testing.T, spec runspec.Spec) map[string]string {
	t.Helper()
	r, err := zoo.RecipeFor(spec.Model)
	require.NoError(t, err)
	cfg, err := train.ConfigFor(spec, r, spec.Limit)
	require.NoError(t, err)
	out := map[string]string{}
	for _, s := range train.Resolved(r, cfg).Settings() {
		out[s.Name] = s.Value
	}
	return out
}

// peerAt is how a refusal names its peer: by its address over gRPC, by
// its pid over shared memory (-transport auto at loopback addresses, as
// these tests run).
const peerAt = `(at 127\.0\.0\.1:\d+|\(pid \d+\))`

// settingOf is the setting a flag as the cases write it gives.
func settingOf(flag string) string {
	name := flag[1:]
	if i := len(name) - len("=false"); i > 0 && name[i:] == "=false" {
		name = name[:i]
	}
	return regexp.MustCompile(`-`).ReplaceAllString(name, "_")
}

// TestStageArgs: a -procs stage process, first started or restarted, is
// started from the run's spec (-spec) with the cut the driver chose in
// place of its stages, its place, the driver's timeouts and credentials;
// pipemare stage reads it back to the same run, and refuses -spec with a
// run flag beside it.
func TestStageArgs(t *testing.T) {
	lr := 0.2
	spec := runspec.Spec{Model: "mlp", Data: "embedded", Stages: "2", Limit: 640, LR: lr}
	tf := trainFlags{net: launch.Net{ConnectTimeout: time.Minute, StallTimeout: 20 * time.Second, RecvTimeout: 5 * time.Minute}}
	args := tf.stageArgs(spec, []int{3}, tf.net, 1, []int{1}, []string{"127.0.0.1:1", "127.0.0.1:2"}, "/tmp/c")
	require.Equal(t, []string{"stage", `-spec={"model":"mlp","data":"embedded","cut":"3","lr":0.2,"limit":640}`, "-stage=1", "-stage-addrs=127.0.0.1:1,127.0.0.1:2", "-listen=fd:3",
		"-connect-timeout=1m0s", "-stall-timeout=20s", "-recv-timeout=5m0s", "-certs=/tmp/c"}, args)
	require.Equal(t, "-insecure", tf.stageArgs(spec, nil, tf.net, 0, []int{0}, []string{"127.0.0.1:1"}, "")[8])
	several := tf.stageArgs(spec, nil, tf.net, 1, []int{1, 2}, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"}, "")
	require.Equal(t, []string{"-stage=1,2", "-stage-addrs=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4", "-listen=fd:3,fd:4"}, several[2:5], "a process hosting two stages inherits a listener for each")
	shmNet := tf.net
	shmNet.Transport = launch.TransportShm
	shm := tf.stageArgs(spec, nil, shmNet, 0, []int{0}, []string{"127.0.0.1:1"}, "")
	require.Equal(t, []string{"-transport=shm", "-insecure"}, shm[8:], "a stage of -procs -transport shm is told to share memory")

	fs := flag.NewFlagSet("stage", flag.ContinueOnError)
	var o options
	o.registerRun(fs)
	require.NoError(t, fs.Parse(nil))
	require.NoError(t, o.fromSpec(strings.TrimPrefix(args[1], "-spec=")))
	want := spec
	want.Stages, want.Cut = "", "3"
	require.Equal(t, want, o.spec())

	code, _, stderr := runCLI(t.Context(), "stage", "-stage", "0", "-stage-addrs", "127.0.0.1:1", "-insecure", "-lr", "0.1", "-spec", `{"model":"mlp"}`)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-spec and -lr: give the run's settings either way, not both")
	code, _, stderr = runCLI(t.Context(), "stage", "-stage", "0", "-stage-addrs", "127.0.0.1:1", "-insecure", "-spec", `{"model":"mlp","rate":1}`)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `-spec: not a run specification: json: unknown field "rate"`)
}

// TestSpecArgs: a spec's command-line form reads back to the same spec.
func TestSpecArgs(t *testing.T) {
	no, seed, t1 := false, int64(4), 0
	spec := runspec.Spec{Model: "mlp", Data: "embedded", Method: "pipemare", Stages: "2", LR: 0.2, Cosine: &no, Seed: &seed, T1: &t1, StepDecay: true, TestLimit: 100}
	args := specArgs(spec)
	require.Equal(t, []string{"-model=mlp", "-data=embedded", "-method=pipemare", "-stages=2", "-lr=0.2", "-cosine=false", "-step-decay=true", "-t1=0", "-seed=4", "-test-limit=100"}, args)
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	var o options
	o.registerRun(fs)
	require.NoError(t, fs.Parse(args))
	require.Equal(t, spec, o.spec())
}
