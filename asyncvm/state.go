package asyncvm

import (
	"context"
	"strings"

	"github.com/pipemare/pipemare/stage"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
)

// State is a pipeline's state at a drained point: how many steps it
// trained and every stage's snapshot (weights, solver state, BatchNorm
// statistics, versions, counters). A fresh VM of the same plan and options
// that Restores it trains on exactly as the saved one would have after its
// Flush.
type State struct {
	Steps  int
	Stages []stage.Snapshot
}

// Save drains the pipeline (Flush: an asynchronous schedule restarts at
// the next Step) and returns its state. A stage whose solver cannot save
// its state (gorgonia's Momentum or Adam, which hide it) makes Save fail
// without harming the VM.
func (vm *VM) Save(ctx context.Context) (*State, error) {
	if err := vm.Flush(ctx); err != nil {
		return nil, err
	}
	st := &State{Steps: vm.supplied, Stages: make([]stage.Snapshot, vm.p)}
	replies, err := vm.ask(ctx, func(int) any { return stage.Save{} })
	if err != nil {
		return nil, err
	}
	for i, m := range replies {
		st.Stages[i] = m.Body.(stage.Saved).Snapshot
	}
	return st, nil
}

// Restore loads st into a fresh VM (no Step yet) of the same plan: the
// next Step is step st.Steps.
func (vm *VM) Restore(ctx context.Context, st *State) error {
	if err := vm.usable(); err != nil {
		return err
	}
	if vm.supplied > 0 {
		return errors.Errorf("asyncvm: Restore: the VM has trained %d steps already; restore into a fresh one", vm.supplied)
	}
	if st == nil || len(st.Stages) != vm.p {
		n := 0
		if st != nil {
			n = len(st.Stages)
		}
		return errors.Errorf("asyncvm: Restore: the state has %d stages, the plan %d", n, vm.p)
	}
	if _, err := vm.ask(ctx, func(i int) any { return stage.Restore{Snapshot: st.Stages[i]} }); err != nil {
		return err
	}
	vm.supplied = st.Steps
	return nil
}

// ask sends every stage the order body(i) and collects their answers in
// stage order. Refusals are collected into one error that does not fail
// the VM.
func (vm *VM) ask(ctx context.Context, body func(i int) any) ([]transport.Message, error) {
	if err := vm.usable(); err != nil {
		return nil, err
	}
	for i := 0; i < vm.p; i++ {
		if err := vm.ep.Send(ctx, transport.Message{Kind: transport.Control, To: transport.Peer(i), Body: body(i)}); err != nil {
			return nil, vm.failWith(errors.Wrapf(err, "asyncvm: ordering stage %d", i))
		}
	}
	out := make([]transport.Message, vm.p)
	var refused []string
	for range vm.p {
		m, err := vm.await(ctx)
		if err != nil {
			return nil, err
		}
		if r, ok := m.Body.(stage.Refused); ok {
			refused = append(refused, r.Message)
		}
		out[m.From] = m
	}
	if len(refused) > 0 {
		return nil, errors.Errorf("asyncvm: %s", strings.Join(refused, "; "))
	}
	return out, nil
}
