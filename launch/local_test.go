//go:build unix

package launch

import (
	"bufio"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/pki"
)

// children makes the stage processes StartLocal starts in this test the
// test binary in a child role, and points TMPDIR, where the throw-away
// certificates go, at a directory of the test's, which it returns.
func children(t *testing.T) string {
	t.Helper()
	t.Setenv(childEnv, "1")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	return tmp
}

// TestStartLocal: each stage process serves on the loopback listener it
// inherits as file descriptor 3, at the address Local gives, with the
// arguments Args made from the addresses and the certificates — a CA and
// certificates for the driver and every stage on 127.0.0.1 — and its
// standard error reaches Stderr; Exited hears of each that exits before
// Stop, and once they all exited Stop leaves nothing behind.
func TestStartLocal(t *testing.T) {
	tmp := children(t)
	var stderr testutil.SyncBuffer
	var gotAddrs []string
	var gotCerts string
	var mu sync.Mutex
	exited := map[int]error{}
	l, err := StartLocal(LocalConfig{Stages: 3, Executable: os.Args[0], Stderr: &stderr,
		Args: func(i int, _ []int, addrs []string, certs string) []string {
			gotAddrs, gotCerts = addrs, certs
			return []string{"serve", fmt.Sprint(i), "of", fmt.Sprint(len(addrs))}
		},
		Exited: func(i int, err error) {
			mu.Lock()
			defer mu.Unlock()
			exited[i] = err
		},
	})
	require.NoError(t, err)
	require.Len(t, l.Addrs, 3)
	require.Len(t, l.PIDs, 3)
	require.Equal(t, l.Addrs, gotAddrs)
	require.Equal(t, l.Certs, gotCerts)
	require.Equal(t, tmp, filepath.Dir(l.Certs), "the certificates are in a temporary directory")
	for i := range 3 {
		require.True(t, strings.HasPrefix(l.Addrs[i], "127.0.0.1:"), l.Addrs[i])
		_, cert, err := pki.Load(l.Certs, transport.Peer(i))
		require.NoError(t, err)
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		require.NoError(t, err)
		require.NoError(t, leaf.VerifyHostname("127.0.0.1"), "stage %d's certificate names loopback", i)
	}
	_, _, err = pki.Load(l.Certs, transport.Driver)
	require.NoError(t, err, "and the driver has one")

	for i, a := range l.Addrs {
		c, err := net.Dial("tcp", a)
		require.NoError(t, err)
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("stage %d of 3\n", i), line, "stage %d serves at its address", i)
		require.NoError(t, c.Close())
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(exited) == 3
	}, time.Minute, 10*time.Millisecond, "every stage exits once its connection closed")
	require.Equal(t, map[int]error{0: nil, 1: nil, 2: nil}, exited, "cleanly")
	require.NoError(t, l.Stop(10*time.Second), "every stage exited 0")
	for i := range 3 {
		require.Contains(t, stderr.String(), fmt.Sprintf("stage %d serving on %s\n", i, l.Addrs[i]))
	}
	requireEmpty(t, tmp)
	require.NoError(t, l.Stop(time.Second), "a second Stop says the same")
}

// TestStartLocalInsecure makes no certificates; without an Executable the
// stages are this program.
func TestStartLocalInsecure(t *testing.T) {
	tmp := children(t)
	l, err := StartLocal(LocalConfig{Stages: 1, Insecure: true,
		Args: func(i int, _ []int, addrs []string, certs string) []string {
			require.Empty(t, certs)
			return []string{"exit", "0"}
		},
	})
	require.NoError(t, err)
	require.Empty(t, l.Certs)
	requireEmpty(t, tmp)
	require.NoError(t, l.Stop(10*time.Second))
}

// TestStopKills: Stop kills the processes still running after the grace
// and says how each ended; a process that exited before Stop is reported
// to Exited with how it ended, the others not.
func TestStopKills(t *testing.T) {
	tmp := children(t)
	exited := make(chan string, 3)
	l, err := StartLocal(LocalConfig{Stages: 3, Executable: os.Args[0],
		Args: func(i int, _ []int, _ []string, _ string) []string {
			if i == 1 {
				return []string{"exit", "7"}
			}
			return []string{"hang"}
		},
		Exited: func(i int, err error) { exited <- fmt.Sprintf("stage %d: %v", i, err) },
	})
	require.NoError(t, err)
	select {
	case e := <-exited:
		require.Equal(t, "stage 1: exit status 7", e)
	case <-time.After(time.Minute):
		t.Fatal("Exited not called")
	}
	start := time.Now()
	err = l.Stop(100 * time.Millisecond)
	require.Less(t, time.Since(start), 30*time.Second)
	require.Error(t, err)
	require.Equal(t, fmt.Sprintf("stage 0 (pid %d): signal: killed\nstage 1 (pid %d): exit status 7\nstage 2 (pid %d): signal: killed", l.PIDs[0], l.PIDs[1], l.PIDs[2]), err.Error())
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the processes' errors are wrapped")
	require.Empty(t, exited, "no Exited for the processes Stop ended")
	requireEmpty(t, tmp)
	require.Equal(t, err, l.Stop(0), "a second Stop says the same")
}

// TestStartLocalFails: a configuration StartLocal cannot start, or a
// program that does not start, is an error that says which; it leaves
// no certificates behind.
func TestStartLocalFails(t *testing.T) {
	tmp := children(t)
	missing := filepath.Join(t.TempDir(), "no-such-program")
	for _, c := range []struct {
		cfg LocalConfig
		err string
	}{
		{LocalConfig{Stages: 0, Executable: os.Args[0]}, "0 stage processes: at least 1"},
		{LocalConfig{Stages: 2, Executable: missing}, "starting stage 0: fork/exec " + missing + ": no such file or directory"},
	} {
		l, err := StartLocal(c.cfg)
		require.EqualError(t, err, c.err)
		require.Nil(t, l)
		requireEmpty(t, tmp)
	}
}

func requireEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing is left in %s", dir)
}

// TestStartLocalHostsSeveralStages: a process hosting several stages
// (Hosts) inherits one listener per stage, in its order (file
// descriptors 3, 4), its k-th at its address's port+k, and is told its
// stages; a process that exits is named by its stages; hosts that miss a
// stage or repeat one are refused.
func TestStartLocalHostsSeveralStages(t *testing.T) {
	children(t)
	hosts := [][]int{{0, 2}, {1, 3}}
	var got [][]int
	var gotAddrs []string
	l, err := StartLocal(LocalConfig{Stages: 4, Hosts: hosts, Executable: os.Args[0], Insecure: true,
		Args: func(i int, stages []int, addrs []string, _ string) []string {
			gotAddrs = addrs
			got = append(got, stages)
			return []string{"host", StageList(stages)}
		}})
	require.NoError(t, err)
	require.Equal(t, hosts, got)
	require.Equal(t, hosts, l.Hosts)
	require.Len(t, l.PIDs, 2)
	require.Len(t, l.Addrs, 2, "one address per process")
	require.Equal(t, l.Addrs, gotAddrs)
	for j, stages := range hosts {
		host, port, err := net.SplitHostPort(l.Addrs[j])
		require.NoError(t, err)
		first, err := strconv.Atoi(port)
		require.NoError(t, err)
		for k, i := range stages {
			c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(first+k)))
			require.NoError(t, err)
			line, err := bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("stage %d on fd %d\n", i, 3+k), line, "stage %d serves at its process's port+%d", i, k)
			require.NoError(t, c.Close())
		}
	}
	require.NoError(t, l.Stop(10*time.Second))

	l, err = StartLocal(LocalConfig{Stages: 4, Hosts: hosts, Executable: os.Args[0], Insecure: true,
		Args: func(int, []int, []string, string) []string { return []string{"exit", "5"} }})
	require.NoError(t, err)
	require.ErrorContains(t, l.Stop(10*time.Second), "stages 0,2 (pid")

	for _, bad := range [][][]int{{{0, 1}, {1, 2, 3}}, {{0, 1}, {2}}, {{0, 1, 2, 3}, {}}} {
		_, err = StartLocal(LocalConfig{Stages: 4, Hosts: bad, Executable: os.Args[0], Insecure: true})
		require.Error(t, err, "%v", bad)
	}
}
