package asyncvm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
	"github.com/pipemare/pipemare/transport/pki"
)

// TestStagesInNetworkNamespacesTrainLikeTheEngine: every schedule, and
// PipeMare with T1+T2 and a warm-up, with each of the test ResNet's 4
// stages a process in its own network namespace — joined to the driver's
// by a veth pair on one bridge, so every byte between stages crosses a
// network interface, as between hosts — over mutual TLS (the addresses are
// not loopback), ends with weights bit-identical to the in-process
// engine's. It needs root and iproute2, and says so when it skips.
//
//	driver (this process, 198.18.0.1 on the bridge)
//	   │ bridge pmb<id>
//	   ├── veth ── netns pm<id>s0: stage 0 at 198.18.0.10:7200
//	   ├── veth ── netns pm<id>s1: stage 1 at 198.18.0.11:7200
//	   …
func TestStagesInNetworkNamespacesTrainLikeTheEngine(t *testing.T) {
	if testing.Short() || testutil.RaceEnabled {
		t.Skip("creates network namespaces and starts 20 processes")
	}
	namespaces, addrs, links := stageNamespaces(t)
	certs := t.TempDir()
	hosts := make([]string, len(addrs))
	for i, a := range addrs {
		hosts[i], _, _ = strings.Cut(a, ":")
	}
	require.NoError(t, pki.Write(certs, hosts))
	roots, cert, err := pki.Load(certs, transport.Driver)
	require.NoError(t, err)

	for _, run := range []string{"sequential", "gpipe", "1f1b", "pipedream", "pipemare-t1t2-warmup"} {
		t.Run(run, func(t *testing.T) {
			m, plan := remotePlan(t)
			vm, err := asyncvm.New(plan, runOptions(t, run)...)
			require.NoError(t, err)
			trainGoldenSteps(t, m, vm)
			require.NoError(t, vm.Close())
			want := testutil.PlanSHA256(t, plan)
			before := linkBytes(t, links)

			var cmds []*exec.Cmd
			for i, ns := range namespaces {
				cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestStageProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s/%d/%s", stageEnv, run, i, strings.Join(addrs, ",")), stageCertsEnv+"="+certs)
				cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
				require.NoError(t, cmd.Start())
				cmds = append(cmds, cmd)
			}
			killAtCleanup(t, cmds)
			m, plan = remotePlan(t)
			ctx := context.Background()
			ep, err := grpcnet.Open(ctx, transport.Driver, remoteNetwork(plan, addrs), grpcnet.WithTLS(roots, cert),
				grpcnet.WithConnectTimeout(30*time.Second), grpcnet.WithRecvTimeout(20*time.Second))
			require.NoError(t, err)
			vm, err = asyncvm.New(plan, append(runOptions(t, run), asyncvm.WithEndpoint(ep))...)
			require.NoError(t, err)
			trainGoldenSteps(t, m, vm)
			require.NoError(t, vm.Close())
			require.Equal(t, want, testutil.PlanSHA256(t, plan), "%s: stages in network namespaces train exactly like the in-process engine", run)
			for i, err := range waitAll(t, cmds, 30*time.Second) {
				require.NoError(t, err, "stage process %d", i)
			}
			crossed := linkBytes(t, links)
			for i := range crossed {
				crossed[i] -= before[i]
			}
			t.Logf("bytes across the stages' veth pairs: %v", crossed)
			for i, n := range crossed {
				// The driver sends every stage its data and receives its
				// weights: far more than a handshake crosses each link.
				require.Greater(t, n, int64(64<<10), "%s: stage %d's traffic crossed its veth pair", run, i)
			}
		})
	}
}

// stageNamespaces creates one network namespace per stage, each joined by a
// veth pair to a bridge that also holds the driver's address, and returns
// the namespaces' names, the stages' addresses and the veth ends on the
// bridge. Everything is removed
// when the test ends. It skips the test where namespaces cannot be made.
func stageNamespaces(t *testing.T) (namespaces, addrs, links []string) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2)")
	}
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		return errors.Wrapf(err, "ip %s: %s", strings.Join(args, " "), out)
	}
	id := os.Getpid() % 100000
	bridge := fmt.Sprintf("pmb%d", id)
	if err := ip("link", "add", bridge, "type", "bridge"); err != nil {
		t.Skipf("cannot create a bridge here: %v", err)
	}
	t.Cleanup(func() { _ = ip("link", "del", bridge) })
	require.NoError(t, ip("addr", "add", "198.18.0.1/24", "dev", bridge))
	require.NoError(t, ip("link", "set", bridge, "up"))
	for i := 0; i < remoteStages; i++ {
		ns, outer, inner := fmt.Sprintf("pm%ds%d", id, i), fmt.Sprintf("pm%da%d", id, i), fmt.Sprintf("pm%dz%d", id, i)
		if err := ip("netns", "add", ns); err != nil {
			t.Skipf("cannot create a network namespace here: %v", err)
		}
		t.Cleanup(func() { _ = ip("netns", "del", ns) })
		stageIP := fmt.Sprintf("198.18.0.%d", 10+i)
		for _, args := range [][]string{
			{"link", "add", outer, "type", "veth", "peer", "name", inner},
			{"link", "set", outer, "master", bridge}, {"link", "set", outer, "up"},
			{"link", "set", inner, "netns", ns},
			{"-n", ns, "addr", "add", stageIP + "/24", "dev", inner},
			{"-n", ns, "link", "set", inner, "up"}, {"-n", ns, "link", "set", "lo", "up"},
		} {
			require.NoError(t, ip(args...))
		}
		namespaces = append(namespaces, ns)
		addrs = append(addrs, stageIP+":7200")
		links = append(links, outer)
	}
	return namespaces, addrs, links
}

// linkBytes is the bytes each network interface named has sent and
// received so far (the kernel's counters).
func linkBytes(t *testing.T, links []string) []int64 {
	n := make([]int64, len(links))
	for i, l := range links {
		for _, dir := range []string{"rx_bytes", "tx_bytes"} {
			b, err := os.ReadFile("/sys/class/net/" + l + "/statistics/" + dir)
			require.NoError(t, err)
			v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			require.NoError(t, err)
			n[i] += v
		}
	}
	return n
}
