package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// bigShard is stage i's shard at step, large enough (256 KiB) that a kill
// often lands inside a write.
func bigShard(step int64, i int) Shard {
	w := make([]float32, 64<<10)
	for j := range w {
		w[j] = float32(step) + float32(i)/4 + float32(j)
	}
	return Shard{Tensors: map[string]tensor.Tensor{"w": tensor.New(tensor.WithBacking(w))}, Ints: map[string]int64{"step": step}}
}

// writeUntilKilled resumes after the latest checkpoint under root and
// commits one checkpoint after another, as a training run does, until it
// is killed; it prints each step it committed on its standard output.
func writeUntilKilled(root string) {
	step := int64(0)
	if c, err := Latest(root); err == nil {
		step = c.Manifest.Step
	} else if !errors.Is(err, ErrNoCheckpoint) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	for {
		step++
		dir, err := Begin(root, step)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		m := Manifest{Step: step, Fingerprint: "crash"}
		for i := 0; i < 3; i++ {
			fi, err := WriteShard(dir, i, bigShard(step, i))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			m.Stages = append(m.Stages, fi)
		}
		if _, err := Commit(root, m); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Printf("committed %d\n", step)
	}
}

// TestSIGKILL kills a process that writes checkpoints at a random instant
// after its first commit, and restarts it, eight times. After every kill
// the latest checkpoint opens and holds its step's shards, every
// checkpoint with a manifest verifies, and the restarted process goes on
// from the latest one. Each round waits for a commit, not for a time, so
// a loaded machine slows the test but does not change what it checks.
func TestSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const rounds = 8
	root := t.TempDir()
	rng := rand.New(rand.NewSource(13))
	last := int64(0)
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashRootEnv+"="+root)
		var stderr limitedBuffer
		cmd.Stderr = &stderr
		out, w, err := os.Pipe()
		require.NoError(t, err)
		cmd.Stdout = w
		require.NoError(t, cmd.Start())
		w.Close()
		committed := make(chan struct{})
		go func() { // ends at EOF, once the writer is gone
			defer out.Close()
			lines := bufio.NewScanner(out)
			if lines.Scan() {
				close(committed)
			}
			for lines.Scan() {
			}
		}()
		select {
		case <-committed:
			time.Sleep(time.Duration(rng.Intn(100)) * time.Millisecond)
		case <-time.After(time.Minute):
			t.Errorf("round %d: the writer committed no checkpoint in a minute", round)
		}
		require.NoError(t, cmd.Process.Kill())
		err = cmd.Wait()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit) && !exit.Exited(), "round %d: the writer was killed, not stopped on its own (%v): %s", round, err, stderr.String())

		c, err := Latest(root, WithFingerprint("crash"), WithStages(3))
		require.NoError(t, err, "round %d", round)
		step := c.Manifest.Step
		require.Greater(t, step, last, "round %d: the run goes on from its latest checkpoint, and committed one more", round)
		last = step
		for i := 0; i < 3; i++ {
			s, err := c.Shard(i)
			require.NoError(t, err)
			requireSameShard(t, bigShard(step, i), s)
		}
		entries, err := List(root)
		require.NoError(t, err)
		t.Logf("round %d: latest step %d, checkpoints %+v", round, step, entries)
		for _, e := range entries {
			if e.Complete {
				_, err := Open(e.Dir)
				require.NoError(t, err, "round %d: a checkpoint with a manifest is whole", round)
			}
		}
	}
	require.GreaterOrEqual(t, last, int64(rounds), "a commit in every round")
}

// limitedBuffer keeps the first 4 KiB a child writes to stderr.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
