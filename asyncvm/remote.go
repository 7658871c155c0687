package asyncvm

import (
	"context"
	"fmt"
	"time"

	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/stage"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// stageFailure is the error of a stage's Failed answer.
func stageFailure(i int, f stage.Failed) error {
	if !f.InAction {
		return errors.Errorf("asyncvm: stage %d: %s", i, f.Message)
	}
	return &StageError{Stage: i, Action: f.Action, Step: f.Step, Err: errors.New(f.Message)}
}

// linkFailure names the stage whose link to the driver failed, and what it
// was running.
func (vm *VM) linkFailure(err error) error {
	var le *transport.LinkError
	if errors.As(err, &le) && le.From >= 0 && int(le.From) < vm.p {
		i := int(le.From)
		return errors.Wrapf(err, "asyncvm: stage %d is unreachable while running %s; every stage is stopped, restart the pipeline from its last checkpoint", i, vm.work(vm.running[i]))
	}
	return errors.Wrap(err, "asyncvm: waiting for the stages")
}

// work names an order's work by its first action and that action's step,
// as the errors of a stage that failed while running it (or before it
// received it) say: "its work from B12 (step 3)".
func (vm *VM) work(a schedule.Action) string {
	step := a.Step
	if a.PerMicro() {
		step = a.Micro / vm.n
	}
	return fmt.Sprintf("its work from %v (step %d)", a, step)
}

// sendFailure is the error of a send to stage i that failed while the
// driver was doing what doing says ("ordering it", "sending it the data of
// microbatch 3"). A broken link to or from stage i says the stage is
// unreachable, as a broken link does while it runs (linkFailure): the
// transport may learn of the break on either direction first.
func sendFailure(err error, i int, doing string) error {
	var le *transport.LinkError
	if errors.As(err, &le) && (int(le.From) == i || int(le.To) == i) {
		return errors.Wrapf(err, "asyncvm: stage %d is unreachable: %s; every stage is stopped, restart the pipeline from its last checkpoint", i, doing)
	}
	return errors.Wrapf(err, "asyncvm: stage %d: %s", i, doing)
}

// causeGrace is how long the driver waits, after a stage failed because
// its link to another stage broke, for that stage's own failure.
const causeGrace = 3 * time.Second

// rootCause waits briefly, once a stage's link to a peer failed, for the
// failure that caused it: the peer's Failed answer, or the driver's own
// link to it — or to any stage, since a process hosting several stages
// takes all their links down at once, and any of them may break first —
// breaking. It returns nil if none comes.
func (vm *VM) rootCause() error {
	ctx, cancel := context.WithTimeout(context.Background(), causeGrace)
	defer cancel()
	for {
		m, err := vm.ep.Recv(ctx, transport.AnyPeer, transport.Reply)
		if err != nil {
			var le *transport.LinkError
			if errors.As(err, &le) && le.From >= 0 {
				return vm.linkFailure(err)
			}
			return nil
		}
		i := int(m.From)
		switch b := m.Body.(type) {
		case stage.Failed:
			vm.hear(i, b.Report)
			vm.final[i] = true
			if b.Peer < 0 {
				return stageFailure(i, b)
			}
		case stage.Stopped:
			vm.hear(i, b.Report)
			vm.final[i] = true
		case stage.Parked:
			vm.hear(i, b.Report)
		}
	}
}

// stopRemote tells every stage to stop and collects their last answers,
// until each has answered or its link is gone.
func (vm *VM) stopRemote() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pending := 0
	for i := 0; i < vm.p; i++ {
		if vm.final[i] {
			continue
		}
		if vm.ep.Send(ctx, transport.Message{Kind: transport.Control, To: transport.Peer(i), Body: stage.Stop{}}) == nil {
			pending++
		}
	}
	for pending > 0 {
		m, err := vm.ep.Recv(ctx, transport.AnyPeer, transport.Reply)
		if err != nil {
			return
		}
		i := int(m.From)
		switch b := m.Body.(type) {
		case stage.Stopped:
			vm.hear(i, b.Report)
		case stage.Failed:
			vm.hear(i, b.Report)
		default:
			continue
		}
		if !vm.final[i] {
			vm.final[i] = true
			pending--
		}
	}
}

// Pull copies every stage's current weights and BatchNorm statistics into
// the plan's learnables and ops, so that the user's model holds what the
// stages hold: with stages in other processes (WithEndpoint) the driver's
// copy is otherwise stale. In-process stages train the user's tensors
// themselves, and Pull does nothing. Flush pulls.
func (vm *VM) Pull(ctx context.Context) error {
	if !vm.remote {
		return vm.usable()
	}
	replies, err := vm.ask(ctx, func(int) any { return stage.Pull{} })
	if err != nil {
		return err
	}
	for i, m := range replies {
		st := vm.plan.Stages[i]
		bns := bnstate.Of(st.Stateful)
		if len(m.Values) != len(st.Learnables)+2*len(bns) {
			return vm.failWith(errors.Errorf("asyncvm: stage %d sent %d tensors for %d learnables and %d BatchNorm ops: another model?", i, len(m.Values), len(st.Learnables), len(bns)))
		}
		for j, l := range st.Learnables {
			if st.Replica(j) { // the owner's copy is the user's
				continue
			}
			if err := tensorutil.CopyInto(l.Value().(tensor.Tensor), m.Values[j]); err != nil {
				return vm.failWith(errors.Wrapf(err, "asyncvm: stage %d: learnable %q", i, l.Name()))
			}
		}
		for j, bn := range bns {
			mean, vari := m.Values[len(st.Learnables)+2*j], m.Values[len(st.Learnables)+2*j+1]
			if err := bn.SetStats(mean.(tensor.Tensor), vari.(tensor.Tensor)); err != nil {
				return vm.failWith(errors.Wrapf(err, "asyncvm: stage %d: BatchNorm %d", i, j))
			}
		}
	}
	return nil
}
