package kubernetes

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/pipemare/pipemare/launch"
)

// strict decodes one YAML document into v; a field v's type does not have
// is an error.
func strict(t *testing.T, doc []byte, v any) {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v))
}

func documents(t *testing.T) [][]byte {
	raw, err := os.ReadFile("jobset.yaml")
	require.NoError(t, err)
	docs := regexp.MustCompile(`(?m)^---$`).Split(string(raw), -1)
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i] = []byte(d)
	}
	return out
}

// TestManifest: the manifest decodes strictly into the API types and has
// what a pipeline needs: one pod per stage from an Indexed Job, DNS host
// names, a restart of the whole set on failure, certificates from a
// Secret, a checkpoint volume that -out and -resume=auto point at, and an environment
// the launch package turns into the stages' addresses.
func TestManifest(t *testing.T) {
	docs := documents(t)
	require.Len(t, docs, 2)
	var pvc corev1.PersistentVolumeClaim
	strict(t, docs[0], &pvc)
	require.Equal(t, "PersistentVolumeClaim", pvc.Kind)
	require.Contains(t, pvc.Spec.AccessModes, corev1.ReadWriteMany, "stages on several nodes write to it")

	var js jobset.JobSet
	strict(t, docs[1], &js)
	require.Equal(t, "jobset.x-k8s.io/v1alpha2", js.APIVersion)
	require.Equal(t, "JobSet", js.Kind)
	require.NotNil(t, js.Spec.Network)
	require.True(t, *js.Spec.Network.EnableDNSHostnames)
	require.NotNil(t, js.Spec.FailurePolicy)
	require.Positive(t, js.Spec.FailurePolicy.MaxRestarts, "a failure restarts the whole pipeline")
	require.Empty(t, js.Spec.FailurePolicy.Rules, "every failure restarts it")

	require.Len(t, js.Spec.ReplicatedJobs, 1)
	rj := js.Spec.ReplicatedJobs[0]
	require.EqualValues(t, 1, rj.Replicas)
	job := rj.Template.Spec
	require.Equal(t, batchv1.IndexedCompletion, *job.CompletionMode)
	require.Equal(t, *job.Completions, *job.Parallelism, "every stage runs at once")
	require.EqualValues(t, 0, *job.BackoffLimit, "a pod does not restart alone")
	pod := job.Template.Spec
	require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	pods, err := strconv.Atoi(env[launch.EnvProcs].Value)
	require.NoError(t, err)
	require.EqualValues(t, pods, *job.Completions, "one pipemare process per pod")
	port := env[launch.EnvPort].Value
	require.Len(t, c.Ports, 1)
	require.Equal(t, port, strconv.Itoa(int(c.Ports[0].ContainerPort)))
	for name, key := range map[string]string{launch.EnvJobSetName: jobset.JobSetNameKey, launch.EnvReplicatedJob: jobset.ReplicatedJobNameKey, launch.EnvJobIndex: jobset.JobIndexKey} {
		require.Equal(t, "metadata.annotations['"+key+"']", env[name].ValueFrom.FieldRef.FieldPath, name)
	}

	// Volumes: certificates from a Secret, read-only; checkpoints from the
	// claim above, where -resume points.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	require.NotNil(t, volumes["certs"].Secret)
	require.Equal(t, "pipemare-certs", volumes["certs"].Secret.SecretName)
	require.True(t, mounts["certs"].ReadOnly)
	require.NotNil(t, volumes["checkpoints"].PersistentVolumeClaim)
	require.Equal(t, pvc.Name, volumes["checkpoints"].PersistentVolumeClaim.ClaimName)
	require.Contains(t, c.Args, "-out="+mounts["checkpoints"].MountPath, "the run's directory is on the claim")
	require.Contains(t, c.Args, "-resume=auto", "a restart resumes it, and the first start starts it")
	require.Contains(t, c.Args, "-certs="+mounts["certs"].MountPath)

	// What each pod's environment becomes, as the Job controller and the
	// downward API fill it in.
	sub := js.Name
	if js.Spec.Network.Subdomain != "" {
		sub = js.Spec.Network.Subdomain
	}
	for i := 0; i < pods; i++ {
		podEnv := map[string]string{
			"JOB_COMPLETION_INDEX": strconv.Itoa(i), launch.EnvProcs: env[launch.EnvProcs].Value, launch.EnvPort: port,
			launch.EnvJobSetName: js.Name, launch.EnvReplicatedJob: rj.Name, launch.EnvJobIndex: "0",
			launch.EnvHostname: js.Name + "-" + rj.Name + "-0-" + strconv.Itoa(i),
		}
		cfg, found, err := launch.FromEnv(func(k string) (string, bool) { v, ok := podEnv[k]; return v, ok })
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, i, cfg.Rank)
		require.Equal(t, ":"+port, cfg.Listen)
		require.Equal(t, "pipemare-stage-0-"+strconv.Itoa(i)+"."+sub+":"+port, cfg.Addrs[i])
	}
}

// TestReadmeCertificatesMatchTheManifest: the hosts the README's certs
// command makes certificates for are the hosts the pods dial.
func TestReadmeCertificatesMatchTheManifest(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`pipemare certs -out certs -hosts (\S+)`).FindSubmatch(readme)
	require.NotNil(t, m, "the README shows pipemare certs")
	hosts := strings.Split(string(m[1]), ",")
	var js jobset.JobSet
	strict(t, documents(t)[1], &js)
	for i := range *js.Spec.ReplicatedJobs[0].Template.Spec.Completions {
		want := "pipemare-stage-0-" + strconv.Itoa(int(i)) + ".pipemare"
		require.True(t, slices.Contains(hosts, want), "no certificate for %s in %v", want, hosts)
	}
}

// TestStrictRefusesUnknownFields: a misspelt field fails the decoding
// instead of being dropped.
func TestStrictRefusesUnknownFields(t *testing.T) {
	j, err := yaml.YAMLToJSON([]byte("spec:\n  network:\n    enableDNSHostname: true\n"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var js jobset.JobSet
	require.ErrorContains(t, dec.Decode(&js), `unknown field "enableDNSHostname"`)
}
