package asyncvm_test

import (
	"context"
	"sync"
	"testing"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/internal/stage"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
)

// deadProcess is a driver's endpoint to stages of which one process,
// hosting stages 0 and 1, has died: it takes every order, answers the
// first wait for a reply with stage 2's failure on its link to stage 1
// (the consequence), then reports the driver's link to stage 0 broken
// (the cause: stage 0 went down with stage 1, and its link broke first).
type deadProcess struct {
	mu      sync.Mutex
	replied bool
}

func (e *deadProcess) Self() transport.Peer                          { return transport.Driver }
func (e *deadProcess) Send(context.Context, transport.Message) error { return nil }
func (e *deadProcess) Close() error                                  { return nil }

func (e *deadProcess) Recv(ctx context.Context, from transport.Peer, k transport.Kind) (transport.Message, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.replied {
		e.replied = true
		return transport.Message{Kind: transport.Reply, From: 2, To: transport.Driver, Body: stage.Failed{
			InAction: true, Action: schedule.Action{Op: schedule.OpForward}, Message: "link stage 1 → stage 2 broke", Peer: 1}}, nil
	}
	return transport.Message{}, &transport.LinkError{From: 0, To: transport.Driver, Kind: transport.Reply, Err: errors.New("the stream broke")}
}

// TestCauseOfALinkFailureIsAnyStageGone: when a stage fails on its link
// to a stage that is gone, the driver looks for the cause, and takes the
// driver's own link to any stage breaking as it — here stage 0's, which
// went down in one process with stage 1 — not the consequence, which a
// restart could not mend (train restarts only on a cause of this kind).
func TestCauseOfALinkFailureIsAnyStageGone(t *testing.T) {
	m, plan := remotePlan(t)
	vm, err := asyncvm.New(plan, append(runOptions(t, "pipemare"), asyncvm.WithEndpoint(&deadProcess{}))...)
	require.NoError(t, err)
	defer vm.Close()
	_, err = vm.Step(context.Background(), makeRemoteData(m, 1)[0])
	require.Error(t, err)
	var se *asyncvm.StageError
	require.False(t, errors.As(err, &se), "not stage 2's failure, a consequence: %v", err)
	var le *transport.LinkError
	require.ErrorAs(t, err, &le)
	require.Equal(t, transport.Peer(0), le.From)
	require.ErrorContains(t, err, "asyncvm: stage 0 is unreachable")
}
