package launch

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

var jobset = map[string]string{
	"JOB_COMPLETION_INDEX": "1", "PIPEMARE_PROCS": "3", "JOBSET_NAME": "pipemare",
	"REPLICATED_JOB_NAME": "stage", "JOB_INDEX": "0", "PIPEMARE_PORT": "7000",
	"HOSTNAME": "pipemare-stage-0-1",
}

func with(base map[string]string, kv ...string) map[string]string {
	m := map[string]string{}
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

func TestFromEnv(t *testing.T) {
	torch := map[string]string{"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Config
		err  string
	}{
		{name: "nothing", env: map[string]string{"PATH": "/bin"}},
		{name: "torchrun on one node", env: with(torch, "LOCAL_WORLD_SIZE", "3"), want: Config{Launcher: "torchrun", Rank: 2, Procs: 3, Stride: 3,
			Addrs: []string{"127.0.0.1:29501", "127.0.0.1:29502", "127.0.0.1:29503"}, Listen: "127.0.0.1:29503"}},
		{name: "torchrun across nodes", env: with(torch, "LOCAL_WORLD_SIZE", "1"), want: Config{Launcher: "torchrun", Rank: 2, Procs: 3, Stride: 3, Listen: ":29503"}},
		{name: "torchrun, no local size", env: torch, want: Config{Launcher: "torchrun", Rank: 2, Procs: 3, Stride: 3, Listen: ":29503"}},
		{name: "torchrun IPv6", env: with(torch, "MASTER_ADDR", "::1", "LOCAL_WORLD_SIZE", "3", "RANK", "0"), want: Config{Launcher: "torchrun", Rank: 0, Procs: 3, Stride: 3,
			Addrs: []string{"[::1]:29501", "[::1]:29502", "[::1]:29503"}, Listen: "[::1]:29501"}},
		{name: "torchrun missing", env: with(torch, "MASTER_PORT", "<unset>", "MASTER_ADDR", "<unset>"),
			err: "torchrun environment: MASTER_ADDR, MASTER_PORT not set (needed with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"},
		{name: "rank past world", env: with(torch, "RANK", "3"), err: "torchrun environment: with WORLD_SIZE=3: RANK=3 is out of range 0..2"},
		{name: "rank not a number", env: with(torch, "RANK", "two"), err: `RANK="two" is not a whole number`},
		{name: "world zero", env: with(torch, "WORLD_SIZE", "0"), err: "WORLD_SIZE=0 is out of range 1..1048576"},
		{name: "port", env: with(torch, "MASTER_PORT", "65534"), err: "MASTER_PORT=65534 leaves no room for 3 stage ports after it"},
		{name: "local bigger than world", env: with(torch, "LOCAL_WORLD_SIZE", "4"), err: "with WORLD_SIZE=3: LOCAL_WORLD_SIZE=4 is out of range 1..3"},
		{name: "jobset", env: jobset, want: Config{Launcher: "jobset", Rank: 1, Procs: 3, Stride: 1, Listen: ":7000", Addrs: []string{
			"pipemare-stage-0-0.pipemare:7000", "pipemare-stage-0-1.pipemare:7000", "pipemare-stage-0-2.pipemare:7000"}}},
		{name: "jobset subdomain", env: with(jobset, "PIPEMARE_SUBDOMAIN", "net", "JOB_INDEX", "2", "HOSTNAME", "pipemare-stage-2-1"),
			want: Config{Launcher: "jobset", Rank: 1, Procs: 3, Stride: 1, Listen: ":7000", Addrs: []string{
				"pipemare-stage-2-0.net:7000", "pipemare-stage-2-1.net:7000", "pipemare-stage-2-2.net:7000"}}},
		{name: "jobset with agreeing torchrun", env: with(jobset, "RANK", "1", "WORLD_SIZE", "3"), want: Config{Launcher: "jobset", Rank: 1, Procs: 3, Stride: 1, Listen: ":7000", Addrs: []string{
			"pipemare-stage-0-0.pipemare:7000", "pipemare-stage-0-1.pipemare:7000", "pipemare-stage-0-2.pipemare:7000"}}},
		{name: "jobset rank disagrees", env: with(jobset, "RANK", "0"), err: "JobSet environment: RANK=0 but JOB_COMPLETION_INDEX=1: they name this process's rank and must agree"},
		{name: "jobset world disagrees", env: with(jobset, "WORLD_SIZE", "4"), err: "WORLD_SIZE=4 but PIPEMARE_PROCS=3: they count the processes and must agree"},
		{name: "jobset index past stages", env: with(jobset, "JOB_COMPLETION_INDEX", "3"),
			err: "with PIPEMARE_PROCS=3 (the Job's completions must equal the pods): JOB_COMPLETION_INDEX=3 is out of range 0..2"},
		{name: "jobset's old name", env: with(jobset, "PIPEMARE_STAGES", "3"), err: "JobSet environment: PIPEMARE_STAGES is now PIPEMARE_PROCS: the number of pods (the Job's completions), which may each host several of -stages"},
		{name: "jobset missing", env: with(jobset, "PIPEMARE_PORT", "<unset>"), err: "JobSet environment: PIPEMARE_PORT not set"},
		{name: "jobset bad name", env: with(jobset, "JOBSET_NAME", "Pipe_Mare"), err: `JOBSET_NAME="Pipe_Mare" is not a DNS label`},
		{name: "jobset hostname", env: with(jobset, "HOSTNAME", "pipemare-stage-0-2"),
			err: "HOSTNAME=pipemare-stage-0-2, but the JobSet's names make this pod pipemare-stage-0-1: are JOBSET_NAME, REPLICATED_JOB_NAME and JOB_INDEX right?"},
		{name: "jobset long", env: with(jobset, "JOBSET_NAME", "a-very-long-jobset-name-that-goes-on-and-on-and-on-and-on-and-on", "HOSTNAME", "<unset>"),
			err: "are longer than 63 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, found, err := FromEnv(env(tc.env))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.True(t, found)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want.Launcher != "", found)
			require.Equal(t, tc.want, c)
		})
	}
}

func ExampleFromEnv() {
	c, _, err := FromEnv(env(map[string]string{
		"JOB_COMPLETION_INDEX": "0", "PIPEMARE_PROCS": "2", "JOBSET_NAME": "pipemare",
		"REPLICATED_JOB_NAME": "stage", "JOB_INDEX": "0", "PIPEMARE_PORT": "7000",
	}))
	fmt.Println(c.Launcher, c.Rank, c.Procs, c.Listen, c.Addrs, err)
	// Output: jobset 0 2 :7000 [pipemare-stage-0-0.pipemare:7000 pipemare-stage-0-1.pipemare:7000] <nil>
}
