package asyncvm

import (
	"context"
	"strings"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/internal/stage"
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
	for i := range vm.updates {
		vm.updates[i] = st.Steps
	}
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
			return nil, vm.failWith(sendFailure(err, i, "ordering it"))
		}
	}
	out := make([]transport.Message, vm.p)
	for range vm.p {
		m, err := vm.await(ctx)
		if err != nil {
			return nil, err
		}
		out[m.From] = m
	}
	var refused []string // in stage order, whatever order the answers came in
	for _, m := range out {
		if r, ok := m.Body.(stage.Refused); ok {
			refused = append(refused, r.Message)
		}
	}
	if len(refused) > 0 {
		return nil, errors.Errorf("asyncvm: %s", strings.Join(refused, "; "))
	}
	return out, nil
}

// Checkpoint drains the pipeline (Flush) and writes a checkpoint of it
// under root (package checkpoint): every stage writes its own shard of the
// step's directory — with stages in other processes, root must be a
// directory they all see at the same path — and only when every shard is
// durable the driver commits the manifest, with meta's configuration, data
// position and random streams, the plan's fingerprint and the step, and
// points root's LATEST at it. keep is how many complete checkpoints to
// keep (0: the package's default). It returns the checkpoint's directory.
//
// The drain costs what a flush costs an asynchronous pipeline (its fill
// and drain bubbles, the next step starting a fresh pipeline); a run that
// checkpoints every K steps drains at the same steps whether or not it was
// interrupted, so a resumed run is exact.
func (vm *VM) Checkpoint(ctx context.Context, root string, meta checkpoint.Manifest, keep int) (string, error) {
	if err := vm.Flush(ctx); err != nil {
		return "", err
	}
	dir, err := checkpoint.Begin(root, int64(vm.supplied))
	if err != nil {
		return "", err
	}
	replies, err := vm.ask(ctx, func(int) any { return stage.Save{Dir: dir} })
	if err != nil {
		return "", err
	}
	meta.Step, meta.Fingerprint, meta.Stages = int64(vm.supplied), vm.plan.Fingerprint(), make([]checkpoint.FileInfo, vm.p)
	for i, m := range replies {
		meta.Stages[i] = m.Body.(stage.Saved).File
	}
	var opts []checkpoint.CommitOption
	if keep > 0 {
		opts = append(opts, checkpoint.Keep(keep))
	}
	return checkpoint.Commit(root, meta, opts...)
}

// Resume loads the checkpoint in dir — a checkpoint's directory, or the
// root given to Checkpoint, whose LATEST names the newest complete one —
// into a fresh VM (no Step yet) of the same plan: it verifies the checkpoint (every file's checksum, the plan's
// fingerprint, the number of stages) and then every stage its shard, and
// returns the manifest (where the data stood, the run's configuration).
// The next Step is the checkpoint's step. A damaged checkpoint or one of
// another model or cut is an error naming the file and what differs, and
// changes nothing.
func (vm *VM) Resume(ctx context.Context, dir string) (*checkpoint.Manifest, error) {
	if err := vm.usable(); err != nil {
		return nil, err
	}
	if vm.supplied > 0 {
		return nil, errors.Errorf("asyncvm: Resume: the VM has trained %d steps already; resume into a fresh one", vm.supplied)
	}
	c, err := checkpoint.Open(dir, checkpoint.WithFingerprint(vm.plan.Fingerprint()), checkpoint.WithStages(vm.p))
	if err != nil {
		return nil, err
	}
	if _, err := vm.ask(ctx, func(i int) any { return stage.Restore{Dir: c.Dir, File: c.Manifest.Stages[i]} }); err != nil {
		return nil, err
	}
	vm.supplied = int(c.Manifest.Step)
	for i := range vm.updates {
		vm.updates[i] = vm.supplied
	}
	return &c.Manifest, nil
}
