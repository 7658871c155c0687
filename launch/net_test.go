//go:build unix

package launch

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/transport"
)

// TestNetChecks: a timeout that is not positive or below the least of the
// transport that carries the run, addresses that are not host:port, and
// credentials that are missing, doubled or plaintext off loopback are
// refused naming the flag; over shared memory no credentials are needed.
func TestNetChecks(t *testing.T) {
	grpc, shm := TransportGRPC, TransportShm
	requireFlags(t, Net{}.CheckTimeout(grpc), "-connect-timeout 0s: must be positive")
	require.NoError(t, Net{ConnectTimeout: time.Second}.CheckTimeout(grpc))
	requireFlags(t, Net{ConnectTimeout: time.Second, StallTimeout: 3 * time.Second}.CheckTimeout(grpc), "-stall-timeout 3s: must be at least 11s (gRPC's keepalive pings a peer at most every 10s)")
	requireFlags(t, Net{ConnectTimeout: time.Second, RecvTimeout: -time.Second}.CheckTimeout(grpc), "-recv-timeout -1s: must be positive (0: the default, 2m0s)")
	require.NoError(t, Net{ConnectTimeout: time.Second, StallTimeout: 11 * time.Second, RecvTimeout: time.Second}.CheckTimeout(grpc))
	require.NoError(t, Net{ConnectTimeout: time.Second, StallTimeout: 3 * time.Second, Transport: grpc}.CheckTimeout(shm), "the transport checked is the one given, resolved")
	require.NoError(t, Net{ConnectTimeout: time.Second, StallTimeout: 100 * time.Millisecond}.CheckTimeout(shm))
	requireFlags(t, Net{ConnectTimeout: time.Second, StallTimeout: 50 * time.Millisecond}.CheckTimeout(shm), "-stall-timeout 50ms: must be at least 100ms (over shared memory the peers beat four times in it)")
	require.Equal(t, 2*time.Second, Net{ConnectTimeout: time.Second}.FirstOrder())
	_, err := Net{StageAddrs: "h0"}.Addrs()
	requireFlags(t, err, `-stage-addrs: "h0" is not host:port`)

	loop := []string{"127.0.0.1:7000", "[::1]:7000"}
	require.NoError(t, Net{Credentials: Credentials{Insecure: true}}.CheckCredentials(grpc, loop))
	require.NoError(t, Net{Credentials: Credentials{Dir: "certs"}}.CheckCredentials(grpc, []string{"h0:7000"}))
	requireFlags(t, Net{Credentials: Credentials{Insecure: true, Dir: "certs"}}.CheckCredentials(grpc, loop), "-insecure and -certs certs: choose one")
	requireFlags(t, Net{Credentials: Credentials{Insecure: true}}.CheckCredentials(grpc, []string{"127.0.0.1:1", "h0:7000"}),
		"-insecure: plaintext refused: h0:7000 is not a loopback address; give -certs DIR (pipemare certs writes one)")
	require.Contains(t, asFlags(Net{}.CheckCredentials(grpc, loop)), "-certs DIR or -insecure: the links between processes need mutual TLS")
	require.NoError(t, Net{}.CheckCredentials(shm, loop), "shared memory uses no TLS")
	require.NoError(t, Net{Credentials: Credentials{Dir: "certs"}}.CheckCredentials(shm, loop))
	requireFlags(t, Net{Credentials: Credentials{Insecure: true, Dir: "certs"}}.CheckCredentials(shm, loop), "-insecure and -certs certs: choose one")
}

// TestNetConnectorWords: Net's connector is Place's, its errors worded by
// the flags: a stage's missing certificate names -certs and says how to
// make one, a listener that cannot be had names -listen, and a timeout
// says to give more -connect-timeout; errors.Is still sees the cause.
func TestNetConnectorWords(t *testing.T) {
	plan := mlpPlan(t)
	addrs := freeAddrs(t, 2)
	dir := t.TempDir()
	n := Net{Credentials: Credentials{Dir: dir}, ConnectTimeout: time.Second, Transport: TransportGRPC} // loopback: auto would share memory
	_, err := n.Connector(Place{Addrs: addrs, Stage: 1})(context.Background(), plan)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Regexp(t, `^-certs `+dir+`: pipemare certs writes one certificate per host of -hosts, or -stages N for N stages on one host: `, asFlags(err))
	_, err = n.Connector(Place{Addrs: addrs, Stage: -1})(context.Background(), plan)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Regexp(t, `^-certs `+dir+`: `, asFlags(err))

	n = Net{Credentials: Credentials{Insecure: true}, ConnectTimeout: 200 * time.Millisecond, Transport: TransportGRPC}
	_, err = n.Connector(Place{Addrs: addrs, Stage: 0, Listen: "fd:x"})(context.Background(), plan)
	requireFlags(t, err, "-listen: fd:x: a file descriptor of 3 or more")
	ep, err := n.Connector(Place{Addrs: addrs, Stage: -1})(context.Background(), plan)
	require.ErrorIs(t, err, transport.ErrConnectTimeout)
	require.Nil(t, ep)
	require.Regexp(t, `; -connect-timeout 200ms: give more if the processes start further apart; this process waited over gRPC \(-transport grpc\): give every process of the pipeline the same -transport and -stage-addrs$`, asFlags(err))
}

// TestStagePlace: a stage's place from its flags, from a launcher's
// environment, or both when they agree; each contradiction or omission
// is refused naming the flag.
func TestStagePlace(t *testing.T) {
	insecure := Net{Credentials: Credentials{Insecure: true}, ConnectTimeout: time.Second}
	withAddrs := insecure
	withAddrs.StageAddrs = "127.0.0.1:7000,127.0.0.1:7001"
	torch := Config{Launcher: "torchrun", Rank: 1, Procs: 2, Stride: 2, Addrs: []string{"127.0.0.1:8001", "127.0.0.1:8002"}, Listen: "127.0.0.1:8002"}

	pl, err := withAddrs.StagePlace(1, "fd:3", Config{}, false)
	require.NoError(t, err)
	require.Equal(t, Place{Addrs: []string{"127.0.0.1:7000", "127.0.0.1:7001"}, Stage: 1, Listen: "fd:3", AddrsFrom: "{stage_addrs}"}, pl)
	pl, err = insecure.StagePlace(-1, "", torch, true)
	require.NoError(t, err)
	require.Equal(t, Place{Addrs: torch.Addrs, Stride: 2, Stage: 1, Listen: torch.Listen, Launcher: "torchrun", AddrsFrom: "the torchrun environment"}, pl)
	pl, err = withAddrs.StagePlace(1, "", torch, true)
	require.NoError(t, err)
	require.Equal(t, "{stage_addrs}", pl.AddrsFrom, "-stage-addrs over the environment's")

	for _, c := range []struct {
		n     Net
		index int
		env   Config
		found bool
		err   string
	}{
		{Net{StageAddrs: "127.0.0.1:7000"}, 0, Config{}, false, "-connect-timeout 0s: must be positive"},
		{Net{StageAddrs: "127.0.0.1:7000", ConnectTimeout: time.Second, StallTimeout: 50 * time.Millisecond}, 0, Config{}, false, "-stall-timeout 50ms: must be at least 100ms (over shared memory"},
		{Net{StageAddrs: "127.0.0.1:7000,h1:7000", ConnectTimeout: time.Second, StallTimeout: 3 * time.Second}, 0, Config{}, false, "-stall-timeout 3s: must be at least 11s (gRPC's keepalive"},
		{Net{StageAddrs: "127.0.0.1:7000", ConnectTimeout: time.Second, Transport: TransportGRPC}, 0, Config{}, false, "-certs DIR or -insecure: the links between processes need mutual TLS"},
		{withAddrs, -1, Config{}, false, "-stage: which stage this process serves (or run it under torchrun or a JobSet, which say)"},
		{insecure, 0, Config{}, false, "-stage-addrs: the stages' addresses, host:port, in stage order"},
		{insecure, -1, Config{Launcher: "torchrun", Rank: 0, Procs: 2, Stride: 2}, true, "-stage-addrs: the stages' addresses"},
		{withAddrs, -1, Config{Launcher: "jobset", Rank: 0, Procs: 3, Stride: 1}, true, "-stage-addrs: 2 addresses, the jobset environment 3 processes: give one per process"},
		{withAddrs, 2, Config{}, false, "-stage 2: -stage-addrs gives the addresses of stages 0..1"},
		{Net{StageAddrs: "h0:1,h1:1", Credentials: Credentials{Insecure: true}, ConnectTimeout: time.Second}, 0, Config{}, false, "-insecure: plaintext refused: h0:1 is not a loopback address"},
	} {
		_, err := c.n.StagePlace(c.index, "", c.env, c.found)
		require.Contains(t, asFlags(err), c.err, "%+v", c)
	}
	auto := Net{StageAddrs: "127.0.0.1:7000,localhost:7001", ConnectTimeout: time.Second, StallTimeout: 3 * time.Second}
	_, err = auto.StagePlace(1, "", Config{}, false)
	require.NoError(t, err, "on loopback auto shares memory: no credentials, and its least stall timeout")
	_, err = insecure.StagePlace(-1, ":9000", Config{Launcher: "jobset", Procs: 2, Stride: 1, Addrs: []string{"p0:1", "p1:1"}}, true)
	require.ErrorContains(t, err, "p0:1 is not a loopback address", "the addresses it dials, and where it listens, are checked")
}
