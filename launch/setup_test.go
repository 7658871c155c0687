//go:build unix

package launch

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
)

// TestDecide: where the stages run, from the settings and a launcher's
// environment, and the settings that contradict each other.
func TestDecide(t *testing.T) {
	net := Net{ConnectTimeout: time.Second}
	insecure := net
	insecure.Credentials.Insecure = true
	addrs := insecure
	addrs.StageAddrs = "127.0.0.1:7000,127.0.0.1:7001"
	jobset := func(stage int) Config {
		return Config{Launcher: "jobset", Rank: stage, Procs: 2, Stride: 1, Addrs: []string{"127.0.0.1:7000", "127.0.0.1:7001"}, Listen: "127.0.0.1:7000"}
	}
	for _, c := range []struct {
		s     Setup
		env   Config
		found bool
		where Where
		pl    Place
	}{
		{Setup{Net: net}, Config{}, false, InProcess, Place{Stage: -1}},
		{Setup{Net: net, Procs: 2, ProcsGiven: true, Pin: true}, Config{}, false, LocalProcs, Place{Stage: -1}},
		{Setup{Net: addrs}, Config{}, false, Remote, Place{Addrs: []string{"127.0.0.1:7000", "127.0.0.1:7001"}, Stage: -1, AddrsFrom: "{stage_addrs}"}},
		{Setup{Net: insecure}, jobset(0), true, LaunchedFirst, Place{Addrs: jobset(0).Addrs, Stride: 1, Stage: 0, Listen: "127.0.0.1:7000", Launcher: "jobset", AddrsFrom: "the jobset environment"}},
		{Setup{Net: insecure}, jobset(1), true, LaunchedStage, Place{Addrs: jobset(1).Addrs, Stride: 1, Stage: 1, Listen: "127.0.0.1:7000", Launcher: "jobset", AddrsFrom: "the jobset environment"}},
	} {
		w, pl, err := c.s.Decide(c.env, c.found)
		require.NoError(t, err, "%+v", c)
		if c.where != InProcess {
			// On loopback auto shares memory: no credentials are needed.
			c.s.Credentials.Insecure = false
			w2, pl2, err := c.s.Decide(c.env, c.found)
			require.NoError(t, err, "%+v without credentials", c)
			require.Equal(t, c.where, w2)
			require.Equal(t, c.pl, pl2)
		}
		require.Equal(t, c.where, w, "%+v", c)
		require.Equal(t, c.pl, pl, "%+v", c)
	}
	certs := net
	certs.Credentials.Dir = "certs"
	grpc := net
	grpc.Transport = TransportGRPC
	for _, c := range []struct {
		s     Setup
		found bool
		err   string
	}{
		{Setup{}, false, "-connect-timeout 0s: must be positive"},
		{Setup{Net: net, Pin: true}, false, "-pin: places -procs's stage processes on CPUs of their own: give -procs"},
		{Setup{Net: net, ProcsGiven: true}, false, "-procs 0: the number of stage processes, at least 1"},
		{Setup{Net: addrs, Procs: 2}, false, "-procs 2 and -stage-addrs: -procs starts the stages here"},
		{Setup{Net: net, Procs: 2}, true, "-procs 2: the jobset environment has started the stages already"},
		{Setup{Net: certs, Procs: 2}, false, "-procs 2 and -certs: -procs makes throw-away certificates"},
		{Setup{Net: grpc}, true, "-certs DIR or -insecure"},
		{Setup{Net: Net{StageAddrs: "127.0.0.1:7000", ConnectTimeout: time.Second, Transport: TransportGRPC}}, false, "-certs DIR or -insecure"},
		{Setup{Net: Net{StageAddrs: "127.0.0.1:7000,h1:7000", ConnectTimeout: time.Second}}, false, "-certs DIR or -insecure"},
		{Setup{Net: Net{StageAddrs: "127.0.0.1:7000", ConnectTimeout: time.Second, StallTimeout: 50 * time.Millisecond}}, false, "-stall-timeout 50ms: must be at least 100ms (over shared memory"},
		{Setup{Net: Net{StageAddrs: "h0:7000", ConnectTimeout: time.Second, StallTimeout: time.Second, Credentials: Credentials{Dir: "certs"}}}, false, "-stall-timeout 1s: must be at least 11s (gRPC's keepalive"},
		{Setup{Net: Net{ConnectTimeout: time.Second, StallTimeout: 50 * time.Millisecond}, Procs: 2}, false, "-stall-timeout 50ms: must be at least 100ms (over shared memory"},
		{Setup{Net: Net{StageAddrs: "h0", ConnectTimeout: time.Second}}, false, `-stage-addrs: "h0" is not host:port`},
		{Setup{Net: certs}, false, "-certs and -insecure: they secure the links to stages in other processes: give -procs or -stage-addrs with them"},
	} {
		_, _, err := c.s.Decide(jobset(0), c.found)
		require.Contains(t, asFlags(err), c.err, "%+v", c)
	}
}

// TestFit: stage processes, or addresses (one per process), no more
// than the plan's stages, and dividing them unless placed in blocks
// (balanced, the default here, or contiguous);
// otherwise an error naming the flags (a launcher's processes as the
// launcher's, not -stage-addrs) and the way out.
func TestFit(t *testing.T) {
	addrs := Place{Addrs: []string{"h0:1", "h1:1"}, AddrsFrom: "{stage_addrs}"}
	zbv := Place{Stage: -1, Spec: runspec.Spec{Model: "cnn", Schedule: "zb-v"}}
	require.NoError(t, Setup{Procs: 2}.Fit(make([]float64, 2), Place{Stage: -1}))
	require.NoError(t, Setup{Procs: 2}.Fit(make([]float64, 4), zbv), "two stages per process")
	require.NoError(t, Setup{Procs: 2}.Fit(make([]float64, 15), Place{Stage: -1}), "15 stages in two blocks")
	require.NoError(t, Setup{}.Fit(make([]float64, 2), addrs))
	require.NoError(t, Setup{}.Fit(make([]float64, 6), addrs), "an address per process of three stages")
	require.NoError(t, Setup{}.Fit(make([]float64, 5), Place{Stage: -1}), "in this process, any number")
	requireFlags(t, Setup{Procs: 3}.Fit(make([]float64, 2), Place{Stage: -1}), "-procs 3: 3 processes for the plan's 2 stages: give at most 2")
	requireFlags(t, Setup{Procs: 3}.Fit(make([]float64, 4), zbv), "-procs 3: placed v, every process hosts as many of the plan's 4 stages: give -stages a multiple of 3, or processes that divide 4")
	requireFlags(t, Setup{}.Fit(make([]float64, 1), addrs), "-stage-addrs 2: 2 processes for the plan's 1 stages: give at most 1")
	launched := Place{Addrs: []string{"n:1", "n:2", "n:3"}, Launcher: "torchrun", AddrsFrom: "the torchrun environment"}
	requireFlags(t, Setup{}.Fit(make([]float64, 2), launched), "-stages: the torchrun environment starts 3 processes: 3 processes for the plan's 2 stages: give at most 2")
}

// TestServeBeside: after a driver that succeeded, stop waits for the
// stage to return by itself (within the grace) and returns its error;
// after one that failed, it cancels the stage at once; a stage that does
// not return within the grace is cancelled.
func TestServeBeside(t *testing.T) {
	untilCancelled := func(ctx context.Context) error { <-ctx.Done(); return errors.New("cancelled") }
	returns := make(chan struct{})
	stop := ServeBeside(context.Background(), func(ctx context.Context) error {
		select {
		case <-returns:
			return errors.New("served")
		case <-ctx.Done():
			return ctx.Err()
		}
	}, time.Minute)
	close(returns)
	require.EqualError(t, stop(nil), "served")

	began := time.Now()
	stop = ServeBeside(context.Background(), untilCancelled, time.Minute)
	require.EqualError(t, stop(errors.New("the driver failed")), "cancelled")
	require.Less(t, time.Since(began), 30*time.Second, "no grace after a failed driver")

	stop = ServeBeside(context.Background(), untilCancelled, 10*time.Millisecond)
	require.EqualError(t, stop(nil), "cancelled", "cancelled once the grace passed")
}

// TestLocalDriver: Connect starts the processes, says so, and dials them
// with Dial; a process that exits before the pipeline is up ends the
// connecting with an error naming it (the one killed by a signal, when
// another exited with an error first); Stop ends them and says how. An
// error of StartLocal leaves nothing started.
func TestLocalDriver(t *testing.T) {
	children(t)
	var started *Local
	d := &LocalDriver{
		Config:  LocalConfig{Stages: 2, Executable: os.Args[0], Insecure: true, Args: func(i int, _ []int, _ []string, _ string) []string { return []string{"exit", "3"} }},
		Started: func(l *Local) { started = l },
		Dial: func(l *Local) ConnectFunc {
			return func(ctx context.Context, _ *graphsplit.Plan) (transport.Endpoint, error) {
				<-ctx.Done() // a stage that never answers, until its process exits
				return nil, errors.New("connecting broke off")
			}
		},
	}
	require.Nil(t, d.Local())
	ep, err := d.Connect(context.Background(), nil)
	require.Nil(t, ep)
	require.Regexp(t, `^stage \d exited before the pipeline was up \(exit status 3\); its error is above$`, err.Error())
	require.Same(t, started, d.Local())
	require.Len(t, started.PIDs, 2)
	require.ErrorContains(t, d.Stop(time.Second), "exit status 3")
	first := started
	_, err = d.Connect(context.Background(), nil) // after Stop: new processes, as a restart needs
	require.ErrorContains(t, err, "exited before the pipeline was up")
	require.NotSame(t, first, d.Local())
	require.Same(t, started, d.Local())
	require.NotEqual(t, first.PIDs, started.PIDs)
	require.ErrorContains(t, d.Stop(time.Second), "exit status 3")

	d = &LocalDriver{Config: LocalConfig{Stages: 2, Executable: os.Args[0], Insecure: true, Args: func(int, []int, []string, string) []string { return []string{"exit", "4"} }}}
	_, err = d.Connect(context.Background(), mlpPlan(t)) // Dial's default: Place's connector, plaintext
	require.Regexp(t, `^stage \d exited before the pipeline was up \(exit status 4\); its error is above$`, err.Error())
	require.ErrorContains(t, d.Stop(time.Second), "exit status 4")

	// Stage 0 exits with an error first, as a peer of a stage killed in
	// the handshake does; stage 1, killed, is named.
	d = &LocalDriver{Config: LocalConfig{Stages: 2, Executable: os.Args[0], Insecure: true, Args: func(i int, _ []int, _ []string, _ string) []string {
		return [][]string{{"exit", "1"}, {"die", "50ms"}}[i]
	}}}
	_, err = d.Connect(context.Background(), mlpPlan(t))
	require.EqualError(t, err, "stage 1 exited before the pipeline was up (signal: killed); its error is above")
	require.ErrorContains(t, d.Stop(time.Second), "stage 1 (pid ")

	d = &LocalDriver{Config: LocalConfig{Stages: 0}}
	_, err = d.Connect(context.Background(), nil)
	require.EqualError(t, err, "0 stage processes: at least 1")
	require.Nil(t, d.Local())
	require.NoError(t, d.Stop(time.Second))
}

// TestStageHosts: one host per stage, one host for all, or, for fewer
// hosts than stages, every host for every stage; more hosts than stages
// is an error.
func TestStageHosts(t *testing.T) {
	h, err := StageHosts([]string{"a", "b"}, 2)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"a"}, {"b"}}, h)
	h, err = StageHosts([]string{"a"}, 3)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"a"}, {"a"}, {"a"}}, h)
	h, err = StageHosts([]string{"a", "b"}, 3)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"a", "b"}, {"a", "b"}, {"a", "b"}}, h)
	_, err = StageHosts([]string{"a", "b", "c"}, 2)
	requireFlags(t, err, "-stages 2 and -hosts with 3 hosts: give at most one host per stage: 2")
	_, err = StageHosts([]string{"a"}, 0)
	requireFlags(t, err, "-stages 0: the number of stages, at least 1")
}
