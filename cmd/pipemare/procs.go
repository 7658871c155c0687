package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipemare/pipemare/transport/pki"
)

// localStages are the stage processes of train -procs: this binary's own
// pipemare stage, one process per stage, each serving on a loopback
// listener this process opened and hands over as file descriptor 3 (so no
// other process can take the port in between). This process owns them:
// stop ends and waits for every one on every path, and on Linux each dies
// with this process even when it is killed (Pdeathsig).
type localStages struct {
	addrs []string
	pids  []int
	// certs is the directory of the throw-away CA and certificates (""
	// with -insecure), removed by stop.
	certs   string
	cmds    []*exec.Cmd
	exited  []chan struct{} // closed when the process has been waited for
	errs    []error
	stopped atomic.Bool
	// release ends the goroutine whose locked OS thread started the
	// processes: Pdeathsig fires when the thread that forked a child ends,
	// so that thread must outlive the children.
	release chan struct{}
}

// startLocalStages starts n stage processes. Stage i runs this executable
// with args(i, addrs, certs) (addrs: every stage's address; certs: the
// certificates' directory, "" with insecure), its standard error copied
// to stderr. early is called, from another goroutine, for a process that
// exits before stop was called.
func startLocalStages(n int, insecure bool, args func(i int, addrs []string, certs string) []string, stderr io.Writer, early func(i int, err error)) (*localStages, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("-procs: finding this program to start its stages: %w", err)
	}
	s := &localStages{release: make(chan struct{})}
	files := make([]*os.File, n)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := range files {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("-procs: a listener for stage %d: %w", i, err)
		}
		files[i], err = l.(*net.TCPListener).File()
		l.Close()
		if err != nil {
			return nil, fmt.Errorf("-procs: a listener for stage %d: %w", i, err)
		}
		s.addrs = append(s.addrs, l.Addr().String())
	}
	if !insecure {
		dir, err := os.MkdirTemp("", "pipemare-certs-")
		if err != nil {
			return nil, fmt.Errorf("-procs: throw-away certificates: %w", err)
		}
		s.certs = dir
		hosts, err := stageHosts([]string{"127.0.0.1"}, n)
		if err == nil {
			err = pki.Write(dir, hosts)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("-procs: throw-away certificates: %w", err)
		}
	}
	out := &lockedWriter{w: stderr}
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after the children
		for i := range files {
			cmd := exec.Command(exe, args(i, s.addrs, s.certs)...)
			cmd.ExtraFiles = []*os.File{files[i]}
			cmd.Stderr = out
			ownChild(cmd)
			if err := cmd.Start(); err != nil {
				started <- fmt.Errorf("-procs: starting stage %d: %w", i, err)
				<-s.release
				return
			}
			s.cmds = append(s.cmds, cmd)
			s.pids = append(s.pids, cmd.Process.Pid)
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
			s.errs[i] = cmd.Wait()
			close(done)
			if !s.stopped.Load() && early != nil {
				early(i, s.errs[i])
			}
		}()
	}
	if err != nil {
		s.stop(0)
		return nil, err
	}
	return s, nil
}

// stop waits at most grace for every stage process to exit (the driver
// has told them to stop), kills those still running, waits for them,
// removes the certificates and returns how each process that did not exit
// cleanly ended.
func (s *localStages) stop(grace time.Duration) error {
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
			errs = append(errs, fmt.Errorf("stage %d (pid %d): %w", i, s.pids[i], err))
		}
	}
	if s.certs != "" {
		if err := os.RemoveAll(s.certs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
