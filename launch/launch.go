package launch

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// Config is this process's place in a pipeline started by a launcher:
// Procs processes, each hosting the stages the run's placement gives it
// (Hosts; one each when the run has as many stages as processes), the
// process of rank 0 hosting stage 0 and the driver beside it.
type Config struct {
	// Launcher is "torchrun" or "jobset".
	Launcher string
	// Rank is this process's index, from 0: its RANK, or its pod's
	// completion index.
	Rank int
	// Procs is the number of processes the launcher started.
	Procs int
	// Addrs are the processes' addresses (host:port) as the peers dial
	// them, in rank order; nil when the environment does not determine
	// them (torchrun across several nodes: give them explicitly).
	Addrs []string
	// Listen is the address this process's first stage listens on; its
	// k-th stage listens at its port+k·Stride.
	Listen string
	// Stride is the ports between a process's consecutive stages
	// (Place.Stride): WORLD_SIZE under torchrun, whose processes share the
	// ports of their node; 1 in a JobSet, whose pods each have a host.
	Stride int
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
	EnvProcs           = "PIPEMARE_PROCS"     // the Job's completions: the pods
	envStagesBefore    = "PIPEMARE_STAGES"    // EnvProcs's name before a pod could host several stages
	EnvPort            = "PIPEMARE_PORT"
	EnvHostname        = "HOSTNAME" // set by Kubernetes: checked against the derived name
)

// FromEnv reads the launcher's environment through lookup (os.LookupEnv).
// It reports false when no launcher's variables are set, and an error
// naming the variables when they are incomplete or inconsistent.
//
// Under torchrun, RANK is the process's rank and WORLD_SIZE the number of
// processes; the k-th stage of rank r listens on port
// MASTER_PORT+1+r+k·WORLD_SIZE (MASTER_PORT+1+r when each process hosts
// one stage), at MASTER_ADDR when every process is on one node
// (LOCAL_WORLD_SIZE = WORLD_SIZE), otherwise on every interface, and
// Addrs is nil.
//
// In a JobSet, JOB_COMPLETION_INDEX is the rank, PIPEMARE_PROCS the
// number of pods (the Job's completions), and pod r is
// JOBSET_NAME-REPLICATED_JOB_NAME-JOB_INDEX-r.PIPEMARE_SUBDOMAIN, its k-th
// stage listening on PIPEMARE_PORT+k.
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
	if c.Procs, err = atoi(EnvWorldSize, v[1], 1, 1<<20); err != nil {
		return c, err
	}
	if c.Rank, err = atoi(EnvRank, v[0], 0, c.Procs-1); err != nil {
		return c, errors.Wrapf(err, "with %s=%d", EnvWorldSize, c.Procs)
	}
	c.Stride = c.Procs
	host := v[2]
	if host == "" || strings.ContainsAny(host, " /") {
		return c, errors.Errorf("%s=%q is not a host", EnvMasterAddr, host)
	}
	port, err := atoi(EnvMasterPort, v[3], 1, 65535)
	if err != nil {
		return c, err
	}
	if port+c.Procs > 65535 {
		return c, errors.Errorf("%s=%d leaves no room for %d stage ports after it", EnvMasterPort, port, c.Procs)
	}
	single := false
	if s, ok := lookup(EnvLocalWorldSize); ok {
		local, err := atoi(EnvLocalWorldSize, s, 1, c.Procs)
		if err != nil {
			return c, errors.Wrapf(err, "with %s=%d", EnvWorldSize, c.Procs)
		}
		single = local == c.Procs
	}
	c.Listen = net.JoinHostPort("", strconv.Itoa(port+1+c.Rank))
	if single {
		for r := 0; r < c.Procs; r++ {
			c.Addrs = append(c.Addrs, net.JoinHostPort(host, strconv.Itoa(port+1+r)))
		}
		c.Listen = c.Addrs[c.Rank]
	}
	return c, nil
}

// dnsLabel is an RFC 1123 label, as Kubernetes names pods' hosts.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func fromJobSet(lookup func(string) (string, bool)) (Config, error) {
	c := Config{Launcher: "jobset", Stride: 1}
	if _, ok := lookup(envStagesBefore); ok {
		return c, errors.Errorf("%s is now %s: the number of pods (the Job's completions), which may each host several of -stages", envStagesBefore, EnvProcs)
	}
	v, err := need(lookup, EnvCompletionIndex, EnvProcs, EnvJobSetName, EnvReplicatedJob, EnvJobIndex, EnvPort)
	if err != nil {
		return c, err
	}
	if c.Procs, err = atoi(EnvProcs, v[1], 1, 1<<20); err != nil {
		return c, err
	}
	if c.Rank, err = atoi(EnvCompletionIndex, v[0], 0, c.Procs-1); err != nil {
		return c, errors.Wrapf(err, "with %s=%d (the Job's completions must equal the pods)", EnvProcs, c.Procs)
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
	if h := host(c.Procs - 1); len(h) > 63 {
		return c, errors.Errorf("the pods' host names (%s) are longer than 63 characters: shorten the JobSet's or the job's name", h)
	}
	if h, ok := lookup(EnvHostname); ok && h != "" && h != host(c.Rank) {
		return c, errors.Errorf("%s=%s, but the JobSet's names make this pod %s: are %s, %s and %s right?",
			EnvHostname, h, host(c.Rank), EnvJobSetName, EnvReplicatedJob, EnvJobIndex)
	}
	for i := 0; i < c.Procs; i++ {
		c.Addrs = append(c.Addrs, net.JoinHostPort(host(i)+"."+sub, strconv.Itoa(port)))
	}
	c.Listen = net.JoinHostPort("", strconv.Itoa(port))
	return c, nil
}

// consistentWithTorch checks torchrun variables set beside a JobSet's.
func consistentWithTorch(c Config, lookup func(string) (string, bool)) error {
	if r, ok := lookup(EnvRank); ok && r != strconv.Itoa(c.Rank) {
		return errors.Errorf("%s=%s but %s=%d: they name this process's rank and must agree", EnvRank, r, EnvCompletionIndex, c.Rank)
	}
	if w, ok := lookup(EnvWorldSize); ok && w != strconv.Itoa(c.Procs) {
		return errors.Errorf("%s=%s but %s=%d: they count the processes and must agree", EnvWorldSize, w, EnvProcs, c.Procs)
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
