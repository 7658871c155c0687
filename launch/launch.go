package launch

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// Config is this process's place in a pipeline started by a launcher.
type Config struct {
	// Launcher is "torchrun" or "jobset".
	Launcher string
	// Stage is this process's stage: its rank, or its pod's completion
	// index.
	Stage int
	// Stages is the number of stages, one process each.
	Stages int
	// Addrs are the stages' addresses (host:port) as the peers dial them,
	// in stage order; nil when the environment does not determine them
	// (torchrun across several nodes: give them explicitly).
	Addrs []string
	// Listen is the address this stage listens on.
	Listen string
}

// The environment variables read.
const (
	EnvRank           = "RANK"
	EnvWorldSize      = "WORLD_SIZE"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE"

	EnvCompletionIndex = "JOB_COMPLETION_INDEX" // set by the Job controller
	EnvJobSetName      = "JOBSET_NAME"          // the manifest maps these three from
	EnvReplicatedJob   = "REPLICATED_JOB_NAME"  // the pod's jobset.sigs.k8s.io/ annotations
	EnvJobIndex        = "JOB_INDEX"
	EnvSubdomain       = "PIPEMARE_SUBDOMAIN" // default: the JobSet's name, as JobSet's own
	EnvStages          = "PIPEMARE_STAGES"
	EnvPort            = "PIPEMARE_PORT"
	EnvHostname        = "HOSTNAME" // set by Kubernetes: checked against the derived name
)

// FromEnv reads the launcher's environment through lookup (os.LookupEnv).
// It reports false when no launcher's variables are set, and an error
// naming the variables when they are incomplete or inconsistent.
//
// Under torchrun, RANK is the stage and WORLD_SIZE the number of stages;
// when every process is on one node (LOCAL_WORLD_SIZE = WORLD_SIZE) stage
// i listens on MASTER_ADDR:MASTER_PORT+1+i, otherwise on port
// MASTER_PORT+1+i of every interface and Addrs is nil.
//
// In a JobSet, JOB_COMPLETION_INDEX is the stage, PIPEMARE_STAGES the
// number of stages, and stage i is the pod
// JOBSET_NAME-REPLICATED_JOB_NAME-JOB_INDEX-i.PIPEMARE_SUBDOMAIN, listening
// on PIPEMARE_PORT.
func FromEnv(lookup func(string) (string, bool)) (Config, bool, error) {
	_, jobset := lookup(EnvCompletionIndex)
	torch := false
	for _, k := range []string{EnvRank, EnvWorldSize, EnvMasterAddr, EnvMasterPort} {
		if _, ok := lookup(k); ok {
			torch = true
		}
	}
	switch {
	case jobset:
		c, err := fromJobSet(lookup)
		if err == nil && torch {
			err = consistentWithTorch(c, lookup)
		}
		return c, true, errors.Wrap(err, "JobSet environment")
	case torch:
		c, err := fromTorchrun(lookup)
		return c, true, errors.Wrap(err, "torchrun environment")
	}
	return Config{}, false, nil
}

func fromTorchrun(lookup func(string) (string, bool)) (Config, error) {
	c := Config{Launcher: "torchrun"}
	v, err := need(lookup, EnvRank, EnvWorldSize, EnvMasterAddr, EnvMasterPort)
	if err != nil {
		return c, err
	}
	if c.Stages, err = atoi(EnvWorldSize, v[1], 1, 1<<20); err != nil {
		return c, err
	}
	if c.Stage, err = atoi(EnvRank, v[0], 0, c.Stages-1); err != nil {
		return c, errors.Wrapf(err, "with %s=%d", EnvWorldSize, c.Stages)
	}
	host := v[2]
	if host == "" || strings.ContainsAny(host, " /") {
		return c, errors.Errorf("%s=%q is not a host", EnvMasterAddr, host)
	}
	port, err := atoi(EnvMasterPort, v[3], 1, 65535)
	if err != nil {
		return c, err
	}
	if port+c.Stages > 65535 {
		return c, errors.Errorf("%s=%d leaves no room for %d stage ports after it", EnvMasterPort, port, c.Stages)
	}
	single := false
	if s, ok := lookup(EnvLocalWorldSize); ok {
		local, err := atoi(EnvLocalWorldSize, s, 1, c.Stages)
		if err != nil {
			return c, errors.Wrapf(err, "with %s=%d", EnvWorldSize, c.Stages)
		}
		single = local == c.Stages
	}
	c.Listen = net.JoinHostPort("", strconv.Itoa(port+1+c.Stage))
	if single {
		for i := 0; i < c.Stages; i++ {
			c.Addrs = append(c.Addrs, net.JoinHostPort(host, strconv.Itoa(port+1+i)))
		}
		c.Listen = c.Addrs[c.Stage]
	}
	return c, nil
}

// dnsLabel is an RFC 1123 label, as Kubernetes names pods' hosts.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func fromJobSet(lookup func(string) (string, bool)) (Config, error) {
	c := Config{Launcher: "jobset"}
	v, err := need(lookup, EnvCompletionIndex, EnvStages, EnvJobSetName, EnvReplicatedJob, EnvJobIndex, EnvPort)
	if err != nil {
		return c, err
	}
	if c.Stages, err = atoi(EnvStages, v[1], 1, 1<<20); err != nil {
		return c, err
	}
	if c.Stage, err = atoi(EnvCompletionIndex, v[0], 0, c.Stages-1); err != nil {
		return c, errors.Wrapf(err, "with %s=%d (the Job's completions must equal the stages)", EnvStages, c.Stages)
	}
	jobIndex, err := atoi(EnvJobIndex, v[4], 0, 1<<20)
	if err != nil {
		return c, err
	}
	port, err := atoi(EnvPort, v[5], 1, 65535)
	if err != nil {
		return c, err
	}
	sub, ok := lookup(EnvSubdomain)
	if !ok || sub == "" {
		sub = v[2]
	}
	for _, kv := range [][2]string{{EnvJobSetName, v[2]}, {EnvReplicatedJob, v[3]}, {EnvSubdomain, sub}} {
		if !dnsLabel.MatchString(kv[1]) {
			return c, errors.Errorf("%s=%q is not a DNS label (lower-case letters, digits and '-')", kv[0], kv[1])
		}
	}
	host := func(i int) string { return fmt.Sprintf("%s-%s-%d-%d", v[2], v[3], jobIndex, i) }
	if h := host(c.Stages - 1); len(h) > 63 {
		return c, errors.Errorf("the pods' host names (%s) are longer than 63 characters: shorten the JobSet's or the job's name", h)
	}
	if h, ok := lookup(EnvHostname); ok && h != "" && h != host(c.Stage) {
		return c, errors.Errorf("%s=%s, but the JobSet's names make this pod %s: are %s, %s and %s right?",
			EnvHostname, h, host(c.Stage), EnvJobSetName, EnvReplicatedJob, EnvJobIndex)
	}
	for i := 0; i < c.Stages; i++ {
		c.Addrs = append(c.Addrs, net.JoinHostPort(host(i)+"."+sub, strconv.Itoa(port)))
	}
	c.Listen = net.JoinHostPort("", strconv.Itoa(port))
	return c, nil
}

// consistentWithTorch checks torchrun variables set beside a JobSet's.
func consistentWithTorch(c Config, lookup func(string) (string, bool)) error {
	if r, ok := lookup(EnvRank); ok && r != strconv.Itoa(c.Stage) {
		return errors.Errorf("%s=%s but %s=%d: they name this process's stage and must agree", EnvRank, r, EnvCompletionIndex, c.Stage)
	}
	if w, ok := lookup(EnvWorldSize); ok && w != strconv.Itoa(c.Stages) {
		return errors.Errorf("%s=%s but %s=%d: they count the stages and must agree", EnvWorldSize, w, EnvStages, c.Stages)
	}
	return nil
}

// need returns the values of keys, or an error naming those missing.
func need(lookup func(string) (string, bool), keys ...string) ([]string, error) {
	vals := make([]string, len(keys))
	var missing []string
	for i, k := range keys {
		v, ok := lookup(k)
		if !ok {
			missing = append(missing, k)
		}
		vals[i] = strings.TrimSpace(v)
	}
	if len(missing) > 0 {
		return nil, errors.Errorf("%s not set (needed with %s)", strings.Join(missing, ", "), strings.Join(keys, ", "))
	}
	return vals, nil
}

func atoi(key, s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.Errorf("%s=%q is not a whole number", key, s)
	}
	if n < lo || n > hi {
		return 0, errors.Errorf("%s=%d is out of range %d..%d", key, n, lo, hi)
	}
	return n, nil
}
