package asyncvm_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/grpcnet"
	"github.com/stretchr/testify/require"
)

// TestServeStagesHostsWholeWorkers serves the test ResNet's 4 stages as
// ZB-V places them on 2 workers — stages 0 and 3, stages 1 and 2 — each
// worker a ServeStages of its own (its own plan, as a stage process
// builds it) over gRPC on loopback, whose stages take turns; then worker
// 0's stages apart, which take none (turns across processes would never
// come); and requires the weights the engine trains in one process.
func TestServeStagesHostsWholeWorkers(t *testing.T) {
	opts := []asyncvm.Option{asyncvm.WithMicrobatches(goldenN), asyncvm.WithSchedule(schedule.ZBV()), asyncvm.WithSolver(momentumSolver)}
	m, plan := remotePlan(t)
	vm, err := asyncvm.New(plan, opts...)
	require.NoError(t, err)
	trainGoldenSteps(t, m, vm)
	require.NoError(t, vm.Close())
	want := testutil.PlanSHA256(t, plan)
	of := schedule.ZBV().WorkerOf(remoteStages)
	require.Equal(t, []int{0, 1, 1, 0}, []int{of(0), of(1), of(2), of(3)}, "ZB-V's workers")
	ctx := context.Background()

	for _, workers := range [][][]int{{{0, 3}, {1, 2}}, {{0}, {3}, {1, 2}}} {
		served := serveOnLoopback(t, workers, opts)
		m, plan := remotePlan(t)
		ep, err := grpcnet.Open(ctx, transport.Driver, remoteNetwork(plan, served.addrs), grpcnet.WithInsecure(), grpcnet.WithRecvTimeout(20*time.Second))
		require.NoError(t, err)
		vm, err := asyncvm.New(plan, append(opts, asyncvm.WithEndpoint(ep))...)
		require.NoError(t, err)
		trainGoldenSteps(t, m, vm) // Flush pulls the stages' weights into plan
		require.NoError(t, vm.Close())
		require.Equal(t, want, testutil.PlanSHA256(t, plan), "stages served as %v train what one process trains", workers)
		for range workers {
			require.NoError(t, <-served.errs)
		}
	}
}

// served are the stages' addresses and what each ServeStages returned.
type served struct {
	addrs []string
	errs  chan error
}

// serveOnLoopback serves each list of stages of workers with ServeStages
// (its own plan, as a stage process builds it), every stage on a loopback
// port of its own.
func serveOnLoopback(t *testing.T, workers [][]int, opts []asyncvm.Option) served {
	ctx := context.Background()
	sv := served{errs: make(chan error, len(workers))}
	listeners := make([]net.Listener, remoteStages)
	for i := range listeners {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		listeners[i] = l
		sv.addrs = append(sv.addrs, l.Addr().String())
	}
	for _, stages := range workers {
		_, wplan := remotePlan(t)
		go func() {
			eps := make([]transport.Endpoint, len(stages))
			errs := make([]error, len(stages))
			var wg sync.WaitGroup
			for j, i := range stages { // together: each waits for its links' peers
				wg.Add(1)
				go func() {
					defer wg.Done()
					eps[j], errs[j] = grpcnet.Open(ctx, transport.Peer(i), remoteNetwork(wplan, sv.addrs), grpcnet.WithInsecure(), grpcnet.WithListener(listeners[i]), grpcnet.WithRecvTimeout(20*time.Second))
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				for _, e := range eps {
					if e != nil {
						e.Close()
					}
				}
				sv.errs <- err
				return
			}
			sv.errs <- asyncvm.ServeStages(ctx, wplan, stages, eps, opts...)
		}()
	}
	return sv
}
