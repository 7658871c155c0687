package zoo_test

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// The accuracy checks' trainings run in child processes, one per core:
// gorgonia's BatchNorm and reductions fan out goroutines per op, and
// several runs in one process kept 2 cores only 1.4 busy. Every check
// queues its runs before it calls t.Parallel, so when the first
// check resumes the queue holds every run of every selected check, and
// the workers take the longest first (longest-processing-time order):
// both cores stay busy to the end instead of the last check's runs
// trailing on one core, and no check waits for go test's -parallel slot
// to start its runs.

// queuedRun is one child run of a check.
type queuedRun struct {
	t        *testing.T // its check: the child dies with its context and deadline
	model    string
	run      checkRun
	seconds  float64 // its expected length, for the order
	queuedAt time.Time

	done    chan struct{} // closed when the fields below are set
	result  childRun
	err     error
	started time.Duration // time spent in the queue
	wall    time.Duration // the child process's
	cpu     time.Duration // the child process's user + system time
}

var queue struct {
	mu      sync.Mutex
	pending []*queuedRun
	workers int
}

// enqueue adds a check's run to the queue.
func enqueue(t *testing.T, model string, run checkRun, seconds float64) *queuedRun {
	q := &queuedRun{t: t, model: model, run: run, seconds: seconds, queuedAt: time.Now(), done: make(chan struct{})}
	queue.mu.Lock()
	queue.pending = append(queue.pending, q)
	queue.mu.Unlock()
	return q
}

// serveQueue makes sure one worker per core serves the queue; workers stop
// when it is empty.
func serveQueue() {
	queue.mu.Lock()
	defer queue.mu.Unlock()
	for queue.workers < runtime.NumCPU() && queue.workers < len(queue.pending) {
		queue.workers++
		go work()
	}
}

func work() {
	for q := next(); q != nil; q = next() {
		q.started = time.Since(q.queuedAt)
		began := time.Now()
		q.result, q.cpu, q.err = runChild(q.t, q.model, q.run)
		q.wall = time.Since(began)
		close(q.done)
	}
}

// next takes the longest pending run off the queue, or retires the worker
// (nil) when there is none.
func next() *queuedRun {
	queue.mu.Lock()
	defer queue.mu.Unlock()
	if len(queue.pending) == 0 {
		queue.workers--
		return nil
	}
	best := 0
	for i, q := range queue.pending {
		if q.seconds > queue.pending[best].seconds {
			best = i
		}
	}
	q := queue.pending[best]
	queue.pending = append(queue.pending[:best], queue.pending[best+1:]...)
	return q
}
