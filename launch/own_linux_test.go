package launch

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStageProcessesDieWithTheirParent: the stage processes of a process
// that is SIGKILLed, which cannot stop them, die with it (OwnChild's
// Pdeathsig); they have process groups of their own.
func TestStageProcessesDieWithTheirParent(t *testing.T) {
	parent := exec.Command(os.Args[0], "parent", "2")
	parent.Env = append(os.Environ(), childEnv+"=1")
	out, err := parent.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, parent.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("the parent said nothing: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "pids ")) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.Len(t, pids, 2)
	for _, pid := range pids {
		require.False(t, ended(pid), "stage process %d runs", pid)
		pgid, err := syscall.Getpgid(pid)
		require.NoError(t, err)
		require.Equal(t, pid, pgid, "stage process %d leads a process group of its own", pid)
	}
	require.NoError(t, parent.Process.Kill())
	_ = parent.Wait()
	for _, pid := range pids {
		require.Eventually(t, func() bool { return ended(pid) }, 10*time.Second, 10*time.Millisecond, "stage process %d dies with its parent", pid)
	}
}

// ended reports whether process pid has ended, or is a zombie nobody
// reaps.
func ended(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b) // pid (comm) state …
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}
