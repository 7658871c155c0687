package launch

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// childEnv makes the test binary a child process of a test instead of
// running the tests: StartLocal's stage processes and the parent of the
// Pdeathsig test are this binary, their role in their arguments.
const childEnv = "LAUNCH_TEST_CHILD"

// TestMain fails the package's tests if any goroutine outlives them, or
// runs the test binary as a child (childEnv).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// child is a child process of the tests, by its first argument:
//
//	serve i      a stage: accept one connection on the listener inherited
//	             as file descriptor 3, send it "stage i <the rest of the
//	             arguments>", wait for it to close, exit 0 (it says so
//	             on its standard error first)
//	host 0,2     a process hosting stages 0 and 2: on each listener
//	             inherited (file descriptors 3, 4, …) accept one
//	             connection, send it "stage i on fd n", wait for it to
//	             close; exit 0 once all have
//	exit n       exit with code n at once
//	die d        kill itself with SIGKILL after the duration d
//	hang         run until killed
//	parent n     StartLocal n hang processes, print their pids, hang
func child(args []string) int {
	switch args[0] {
	case "serve":
		l, err := net.FileListener(os.NewFile(3, "listener"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		fmt.Fprintf(os.Stderr, "stage %s serving on %s\n", args[1], l.Addr())
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		fmt.Fprintf(c, "stage %s\n", strings.Join(args[1:], " "))
		_, _ = io.Copy(io.Discard, c)
		return 0
	case "host":
		stages := strings.Split(args[1], ",")
		done := make(chan error, len(stages))
		for k, st := range stages {
			go func() {
				l, err := net.FileListener(os.NewFile(uintptr(3+k), "listener"))
				if err == nil {
					var c net.Conn
					if c, err = l.Accept(); err == nil {
						fmt.Fprintf(c, "stage %s on fd %d\n", st, 3+k)
						_, _ = io.Copy(io.Discard, c)
					}
				}
				done <- err
			}()
		}
		for range stages {
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
		}
		return 0
	case "exit":
		n, _ := strconv.Atoi(args[1])
		return n
	case "die":
		d, _ := time.ParseDuration(args[1])
		time.Sleep(d)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
		select {}
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	case "parent":
		n, _ := strconv.Atoi(args[1])
		l, err := StartLocal(LocalConfig{Stages: n, Executable: os.Args[0], Insecure: true,
			Args: func(int, []int, []string, string) []string { return []string{"hang"} }})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		fmt.Println("pids", strings.Trim(fmt.Sprint(l.PIDs), "[]"))
		for {
			time.Sleep(time.Hour)
		}
	}
	fmt.Fprintf(os.Stderr, "%s=1: no child role %q\n", childEnv, args[0])
	return 3
}
