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

// unreachableStage is a driver's endpoint whose link to stage 1 broke
// before the driver's first work order to it: every send to stage 1 fails.
type unreachableStage struct{}

func (unreachableStage) Self() transport.Peer { return transport.Driver }
func (unreachableStage) Close() error         { return nil }
func (unreachableStage) Send(_ context.Context, m transport.Message) error {
	if m.To == 1 {
		return &transport.LinkError{From: transport.Driver, To: 1, Kind: m.Kind, Err: errors.New("the stream broke")}
	}
	return nil
}
func (unreachableStage) Recv(ctx context.Context, _ transport.Peer, _ transport.Kind) (transport.Message, error) {
	<-ctx.Done()
	return transport.Message{}, ctx.Err()
}

// TestAnUnreachableStageNamesTheWorkOrdered: a stage whose link breaks as
// the driver orders its work (a stage process killed between two orders)
// is named with the work it was being ordered, as it is named with the
// work it was running when the break shows on its reply link.
func TestAnUnreachableStageNamesTheWorkOrdered(t *testing.T) {
	m, plan := remotePlan(t)
	vm, err := asyncvm.New(plan, append(runOptions(t, "pipemare"), asyncvm.WithEndpoint(unreachableStage{}))...)
	require.NoError(t, err)
	defer vm.Close()
	_, err = vm.Step(context.Background(), makeRemoteData(m, 1)[0])
	require.EqualError(t, err, "asyncvm: stage 1 is unreachable: ordering its work from F0 (step 0); every stage is stopped, restart the pipeline from its last checkpoint: transport: link driver → stage 1 (control): the stream broke")
}
