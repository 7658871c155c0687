package launch

import (
	stderrors "errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/errors"

	"github.com/pipemare/pipemare/transport/pki"
)

// LocalConfig says which stage processes StartLocal starts.
type LocalConfig struct {
	// Stages is the number of stages: at least 1.
	Stages int
	// Hosts lists the stages each process hosts, every stage in one list
	// (Place.Hosts); nil: one process per stage.
	Hosts [][]int
	// Executable is the program every stage process runs; "" for this
	// program itself (os.Executable).
	Executable string
	// Args are process i's arguments (after the program's name), given
	// the stages it hosts (Hosts[i]), every process's address (host:port,
	// in the order of Hosts: Place.Addrs) and the directory of the
	// throw-away certificates ("" with Insecure). Whatever they say, the
	// process serves its k-th stage on the listener it inherits as file
	// descriptor 3+k (Place.Listen "fd:3", "fd:4", …), at its address's
	// port+k.
	Args func(i int, stages []int, addrs []string, certs string) []string
	// Insecure makes no certificates: the stages are to run plaintext on
	// loopback.
	Insecure bool
	// Stderr receives the processes' standard error, one write at a time
	// (nil: discarded).
	Stderr io.Writer
	// Exited, if not nil, is called from another goroutine for a process
	// that exits before Stop was called, with its index and how it ended
	// (exec.Cmd.Wait's error: nil for exit code 0). Stop waits for the
	// calls to return: Exited must not call Stop or wait for it.
	Exited func(i int, err error)
}

// Local are the stage processes of a pipeline on this host that
// StartLocal started, each serving each of its stages on a loopback
// listener this process opened and handed over (file descriptors 3, 4,
// …), so that no other process can take the port in between. This process owns them:
// Stop ends and waits for every one, and on Linux each dies with this
// process even when that is killed (OwnChild). Its fields are not to be
// changed.
type Local struct {
	// Addrs are the processes' addresses, 127.0.0.1:port, in the order
	// of Hosts (one per stage, in stage order, when each hosts one): the
	// process serves its k-th stage at port+k (Place.Addrs).
	Addrs []string
	// PIDs are the stage processes' ids, in the order of Hosts.
	PIDs []int
	// Hosts are the stages each process hosts (LocalConfig.Hosts, or one
	// each).
	Hosts [][]int
	// Certs is the directory of the throw-away CA and the driver's and
	// stages' certificates for 127.0.0.1, as pki.Write lays it out ("" with
	// Insecure): the driver's Credentials.Dir. Stop removes it.
	Certs string

	cmds    []*exec.Cmd
	exited  []chan struct{} // closed when the process has been waited for (and Exited has returned)
	errs    []error
	stopped atomic.Bool
	// release ends the goroutine whose locked OS thread started the
	// processes: Pdeathsig fires when the thread that forked a child ends,
	// so that thread must outlive the children.
	release  chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// StartLocal starts the stage processes of c.Executable on loopback, one
// per list of c.Hosts (one per stage without),
// makes throw-away certificates for them and the driver (unless
// c.Insecure) in a new temporary directory, and returns once every
// process has started: the caller then connects to them as the driver
// (Place{Addrs: l.Addrs, Stage: -1}, Credentials{Dir: l.Certs}) and calls
// Stop when done. On an error nothing is left running or on disk; the
// error says which step failed ("a listener for stage 1: …", "throw-away
// certificates: …", "starting stage 0: …", "starting stages 0,2: …").
func StartLocal(c LocalConfig) (*Local, error) {
	if c.Stages < 1 {
		return nil, errors.Errorf("%d stage processes: at least 1", c.Stages)
	}
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, errors.Wrap(err, "finding this program to start its stages")
		}
		c.Executable = exe
	}
	n := c.Stages
	hosts, err := localHosts(c.Hosts, n)
	if err != nil {
		return nil, err
	}
	s := &Local{release: make(chan struct{}), Hosts: hosts}
	files := make([]*os.File, n)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for _, stages := range hosts {
		ls, err := consecutive(len(stages))
		if err != nil {
			return nil, errors.Wrapf(err, "listeners for %s", stageNames(stages))
		}
		for k, l := range ls {
			if err == nil {
				files[stages[k]], err = l.(*net.TCPListener).File()
			}
			l.Close()
		}
		if err != nil {
			return nil, errors.Wrapf(err, "listeners for %s", stageNames(stages))
		}
		s.Addrs = append(s.Addrs, ls[0].Addr().String())
	}
	if !c.Insecure {
		dir, err := os.MkdirTemp("", "pipemare-certs-")
		if err != nil {
			return nil, errors.Wrap(err, "throw-away certificates")
		}
		s.Certs = dir
		if err := pki.Write(dir, slices.Repeat([]string{"127.0.0.1"}, n)); err != nil {
			os.RemoveAll(dir)
			return nil, errors.Wrap(err, "throw-away certificates")
		}
	}
	var stderr io.Writer
	if c.Stderr != nil {
		stderr = &lockedWriter{w: c.Stderr}
	}
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after the children
		for i, stages := range hosts {
			var args []string
			if c.Args != nil {
				args = c.Args(i, stages, s.Addrs, s.Certs)
			}
			cmd := exec.Command(c.Executable, args...)
			for _, st := range stages {
				cmd.ExtraFiles = append(cmd.ExtraFiles, files[st])
			}
			cmd.Stderr = stderr
			OwnChild(cmd)
			if err := cmd.Start(); err != nil {
				started <- errors.Wrapf(err, "starting %s", stageNames(stages))
				<-s.release
				return
			}
			s.cmds = append(s.cmds, cmd)
			s.PIDs = append(s.PIDs, cmd.Process.Pid)
		}
		started <- nil
		<-s.release
	}()
	err = <-started
	s.errs = make([]error, len(s.cmds))
	for i, cmd := range s.cmds {
		done := make(chan struct{})
		s.exited = append(s.exited, done)
		go func() {
			defer close(done)
			s.errs[i] = cmd.Wait()
			if !s.stopped.Load() && c.Exited != nil {
				c.Exited(i, s.errs[i])
			}
		}()
	}
	if err != nil {
		_ = s.Stop(0)
		return nil, err
	}
	return s, nil
}

// Stop waits at most grace for every stage process to exit (the driver
// has told them to stop), kills those still running, waits for them,
// removes the certificates and returns how each process that did not exit
// cleanly ended ("stage 1 (pid 4242): signal: killed"), joined. It
// returns once every call of Exited has returned; later calls return the
// same.
func (s *Local) Stop(grace time.Duration) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(grace) })
	return s.stopErr
}

func (s *Local) stop(grace time.Duration) error {
	s.stopped.Store(true)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for i, done := range s.exited {
		select {
		case <-done:
		case <-deadline.C:
			for j := i; j < len(s.cmds); j++ {
				_ = s.cmds[j].Process.Kill()
			}
			<-done
		}
	}
	for _, done := range s.exited {
		<-done
	}
	close(s.release)
	var errs []error
	for i, err := range s.errs {
		if err != nil {
			errs = append(errs, errors.Wrapf(err, "%s (pid %d)", stageNames(s.Hosts[i]), s.PIDs[i]))
		}
	}
	if s.Certs != "" {
		if err := os.RemoveAll(s.Certs); err != nil {
			errs = append(errs, err)
		}
	}
	return stderrors.Join(errs...)
}

// consecutive listens on n consecutive ports of loopback, or fails after
// trying a hundred first ports.
func consecutive(n int) ([]net.Listener, error) {
	for range 100 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls := []net.Listener{first}
		port := first.Addr().(*net.TCPAddr).Port
		for k := 1; k < n; k++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+k)))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		if len(ls) == n {
			return ls, nil
		}
		for _, l := range ls {
			l.Close()
		}
	}
	return nil, errors.Errorf("no %d consecutive free ports on loopback", n)
}

// localHosts is hosts checked to list each of n stages once, or one
// process per stage when nil.
func localHosts(hosts [][]int, n int) ([][]int, error) {
	if hosts == nil {
		hosts = make([][]int, n)
		for i := range hosts {
			hosts[i] = []int{i}
		}
		return hosts, nil
	}
	seen := make([]bool, n)
	for _, stages := range hosts {
		if len(stages) == 0 {
			return nil, errors.New("a stage process that hosts no stage")
		}
		for _, i := range stages {
			if i < 0 || i >= n || seen[i] {
				return nil, errors.Errorf("stage %d hosted twice or outside the %d stages", i, n)
			}
			seen[i] = true
		}
	}
	if i := slices.Index(seen, false); i >= 0 {
		return nil, errors.Errorf("stage %d hosted by no process", i)
	}
	return hosts, nil
}

// stageNames names a process by its stages: "stage 1", "stages 0,2".
func stageNames(stages []int) string {
	if len(stages) == 1 {
		return "stage " + StageList(stages)
	}
	return "stages " + StageList(stages)
}

// lockedWriter serialises the writes of several processes' copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
