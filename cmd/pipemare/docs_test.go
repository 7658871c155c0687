package main

// The command lines the documentation shows (the Kubernetes manifest,
// pipemare -h) are ones pipemare accepts.

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pipemare/pipemare/launch"
	"github.com/pipemare/pipemare/rundir"
	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/zoo"
)

// jobsetContainer is what the tests read of deploy/kubernetes/jobset.yaml:
// the JobSet's name, its replicated job and the stage container.
type jobsetContainer struct {
	Metadata struct{ Name string }
	Spec     struct {
		ReplicatedJobs []struct {
			Name     string
			Template struct {
				Spec struct {
					Completions int
					Template    struct {
						Spec struct {
							Containers []struct {
								Args []string
								Env  []struct{ Name, Value string }
							}
						}
					}
				}
			}
		} `yaml:"replicatedJobs"`
	}
}

// TestJobSetManifestArgs: the container arguments of the Kubernetes
// manifest are a pipemare train command line its flag set accepts, and in
// each pod's JobSet environment they make pod 0 the driver beside stage 0
// and every other pod a stage, of a plan with one stage per pod, with
// checkpoints and -resume=auto on the claim, and a -connect-timeout that
// lets pods start minutes apart. (deploy/kubernetes's own test
// decodes the manifest strictly into the API types.)
func TestJobSetManifestArgs(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/kubernetes/jobset.yaml")
	require.NoError(t, err)
	var js jobsetContainer
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	for js.Metadata.Name == "" || len(js.Spec.ReplicatedJobs) == 0 {
		js = jobsetContainer{}
		require.NoError(t, dec.Decode(&js), "a JobSet document")
	}
	rj := js.Spec.ReplicatedJobs[0]
	c := rj.Template.Spec.Template.Spec.Containers[0]
	require.NotEmpty(t, c.Args)
	require.Equal(t, "train", c.Args[0], "pipemare train: under a JobSet pod 0 drives, the others serve")
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	pods := rj.Template.Spec.Completions
	require.Equal(t, strconv.Itoa(pods), env[launch.EnvProcs])
	for i := range pods {
		podEnv := map[string]string{
			launch.EnvCompletionIndex: strconv.Itoa(i), launch.EnvProcs: env[launch.EnvProcs], launch.EnvPort: env[launch.EnvPort],
			launch.EnvJobSetName: js.Metadata.Name, launch.EnvReplicatedJob: rj.Name, launch.EnvJobIndex: "0",
		}
		defer func(f func(string) (string, bool)) { lookupEnv = f }(lookupEnv)
		lookupEnv = func(k string) (string, bool) { v, ok := podEnv[k]; return v, ok }

		fs, o, tf := trainFlagSet()
		require.NoError(t, fs.Parse(c.Args[1:]), "the flags exist")
		require.Zero(t, fs.NArg(), "no stray argument")
		w, pl, err := tf.place()
		require.NoError(t, err)
		require.Equal(t, i, pl.Stage)
		require.Equal(t, "jobset", pl.Launcher)
		if i == 0 {
			require.Equal(t, launch.LaunchedFirst, w, "pod 0 drives")
		} else {
			require.Equal(t, launch.LaunchedStage, w, "pod %d serves its stage", i)
		}
		require.Positive(t, tf.checkpointEvery, "a restarted pipeline has checkpoints to resume from")
		require.Equal(t, "/checkpoints", o.out)
		require.Equal(t, rundir.ResumeAuto, tf.resume, "a restart resumes, the first start starts")
		require.GreaterOrEqual(t, tf.net.ConnectTimeout, time.Minute, "pods may start minutes apart")
		r, err := zoo.RecipeFor(o.model)
		require.NoError(t, err)
		n, err := runout.StageCount(r, o.stages)
		require.NoError(t, err)
		require.Equal(t, pods, n, "one stage per pod")
	}
}

// TestUsageExamples: the command lines under "examples:" in pipemare -h
// are ones the commands accept: train's parse with its flag set and say
// where the stages run; eval's fails only for want of the model file.
func TestUsageExamples(t *testing.T) {
	_, ex, ok := strings.Cut(usage, "\nexamples:\n")
	require.True(t, ok)
	ex, _, _ = strings.Cut(ex, "\n\n")
	lines := strings.Split(ex, "\n")
	require.Len(t, lines, 4)
	for _, line := range lines {
		cmdline, _, _ := strings.Cut(strings.TrimSpace(line), "   ") // then the comment
		args := strings.Fields(cmdline)
		require.Equal(t, "pipemare", args[0])
		switch args[1] {
		case "train":
			fs, _, tf := trainFlagSet()
			require.NoError(t, fs.Parse(args[2:]), line)
			_, _, err := tf.place()
			require.NoError(t, err, line)
		case "eval":
			code, _, stderr := runCLI(t.Context(), args[1:]...)
			require.Equal(t, 1, code, "%s: the flags are right (%s)", line, stderr)
			require.Contains(t, stderr, "run/model.safetensors: no such file")
		default:
			t.Fatalf("%s: no check for pipemare %s", line, args[1])
		}
	}
}
