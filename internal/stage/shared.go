package stage

import (
	"context"
	"slices"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// shared is what a stage does for the learnables several stages read
// (graphsplit.Plan.Shared). Their owner — the first reader — updates them:
//
//	replica R, update k ── Shared{step k}: Σ_m ∂cost/∂W over R's uses ──▶ owner O
//	owner O, update k: own gradient + the replicas' sums, in stage order;
//	                   the solver steps W
//	owner O ── Shared{version k+1}: W after update k ──▶ every replica
//
// A replica's forward of microbatch m reads the version of W its owner's
// forward of m read (the driver says which: Work.Shared); its backward
// reads the version of its latest forward (PipeDream's: its forward's). A
// replica keeps its own copy of W — it never reads the owner's tensor —
// and the versions its forwards in flight need.
type shared struct {
	owners   []int     // stages owning a learnable this stage replicates, ascending
	replicas []replica // the learnables this stage holds replicas of
	owned    []owned   // the learnables this stage owns and others read
}

type replica struct {
	i        int // index in Stage.Learnables
	owner    int
	ownerAt  int                   // index of owner in shared.owners
	versions map[int]*tensor.Dense // version of W → its values
	readAt   map[int]int           // microbatch → the version its forward read
	last     int                   // the version of the latest forward
}

type owned struct {
	i        int   // index in Stage.Learnables
	replicas []int // the other readers, ascending
}

// newShared sets up the stage's shared learnables: a replica gets its own
// copy of W, holding version 0 (the initial values, which every process
// builds alike).
func newShared(r *Runtime) (shared, error) {
	s := shared{owners: r.plan.Owners(r.index)}
	for i := range r.st.Learnables {
		sh := r.st.Shared[i]
		switch {
		case sh == nil:
		case sh.Owner == r.index:
			s.owned = append(s.owned, owned{i: i, replicas: sh.Replicas()})
		default:
			at := slices.Index(s.owners, sh.Owner)
			w, err := tensorutil.Clone(r.params[i])
			if err != nil {
				return s, err
			}
			s.replicas = append(s.replicas, replica{i: i, owner: sh.Owner, ownerAt: at, versions: map[int]*tensor.Dense{0: w}, readAt: map[int]int{}})
		}
	}
	return s, nil
}

// isReplica reports whether Stage.Learnables[i] is a replica.
func (s *shared) isReplica(i int) bool {
	for _, rp := range s.replicas {
		if rp.i == i {
			return true
		}
	}
	return false
}

// version returns version v of replica rp, receiving the owner's versions
// until it arrives.
func (r *Runtime) replicaVersion(ctx context.Context, ep transport.Endpoint, rp *replica, v int) (*tensor.Dense, error) {
	for {
		if w, ok := rp.versions[v]; ok {
			return w, nil
		}
		m, err := ep.Recv(ctx, transport.Peer(rp.owner), transport.Shared)
		if err != nil {
			return nil, errors.Wrapf(err, "waiting for version %d of shared learnable %q from stage %d", v, r.st.Learnables[rp.i].Name(), rp.owner)
		}
		// The owner sends, after each update, the new version of every
		// learnable this stage replicates of it, in its Learnables order.
		k := 0
		for j := range r.shared.replicas {
			if q := &r.shared.replicas[j]; q.owner == rp.owner {
				if k >= len(m.Values) {
					return nil, errors.Errorf("stage %d sent %d shared learnables, want more", rp.owner, len(m.Values))
				}
				t, ok := m.Values[k].(*tensor.Dense)
				if !ok {
					return nil, errors.Errorf("stage %d sent %T for shared learnable %q", rp.owner, m.Values[k], r.st.Learnables[q.i].Name())
				}
				q.versions[m.Version] = t
				k++
			}
		}
	}
}

// readReplicas points each replica's copy at the version microbatch m's
// pass reads: at a forward, the owner's version for m (versions, from the
// Work); at a backward, the version of its forward under weight stashing,
// else that of the latest forward.
func (r *Runtime) readReplicas(ctx context.Context, ep transport.Endpoint, m int, versions []int, forward bool) error {
	for j := range r.shared.replicas {
		rp := &r.shared.replicas[j]
		var v int
		switch {
		case forward:
			if rp.ownerAt >= len(versions) {
				return errors.Errorf("internal: no version of shared learnable %q for the forward of microbatch %d", r.st.Learnables[rp.i].Name(), m)
			}
			v = versions[rp.ownerAt]
			rp.readAt[m], rp.last = v, max(rp.last, v)
		case r.seg.StashWeights:
			v = rp.readAt[m]
		default:
			v = rp.last
		}
		w, err := r.replicaVersion(ctx, ep, rp, v)
		if err != nil {
			return err
		}
		if err := tensorutil.CopyInto(r.params[rp.i].(tensor.Tensor), w); err != nil {
			return err
		}
	}
	return nil
}

// sendSums sends the owners this stage's gradient sums of step k for the
// learnables it replicates, and forgets them.
func (r *Runtime) sendSums(ctx context.Context, ep transport.Endpoint, k int) error {
	for _, o := range r.shared.owners {
		var vals []gorgonia.Value
		for _, rp := range r.shared.replicas {
			if rp.owner == o {
				c, err := tensorutil.Clone(r.acc[rp.i])
				if err != nil {
					return err
				}
				vals = append(vals, c)
				r.acc[rp.i].Zero()
			}
		}
		if err := ep.Send(ctx, transport.Message{Kind: transport.Shared, To: transport.Peer(o), Micro: k, Version: r.version, Values: vals}); err != nil {
			return err
		}
	}
	return nil
}

// addSums adds, in stage order, the replicas' gradient sums of step k to
// the accumulators of the learnables this stage owns.
func (r *Runtime) addSums(ctx context.Context, ep transport.Endpoint, k int) error {
	for _, reader := range r.readersOfOwned() {
		m, err := ep.Recv(ctx, transport.Peer(reader), transport.Shared)
		if err != nil {
			return errors.Wrapf(err, "waiting for stage %d's gradients of the shared learnables of step %d", reader, k)
		}
		if m.Micro != k {
			return errors.Errorf("internal: stage %d sent the shared gradients of step %d, want %d", reader, m.Micro, k)
		}
		q := 0
		for _, o := range r.shared.owned {
			if !slices.Contains(o.replicas, reader) {
				continue
			}
			if q >= len(m.Values) {
				return errors.Errorf("stage %d sent %d shared gradients, want more", reader, len(m.Values))
			}
			if err := tensorutil.AddInto(r.acc[o.i], m.Values[q]); err != nil {
				return errors.Wrapf(err, "the gradient of shared learnable %q from stage %d", r.st.Learnables[o.i].Name(), reader)
			}
			q++
		}
	}
	return nil
}

// sendVersions sends every replica the new version of the learnables it
// replicates of this stage.
func (r *Runtime) sendVersions(ctx context.Context, ep transport.Endpoint) error {
	for _, reader := range r.readersOfOwned() {
		var vals []gorgonia.Value
		for _, o := range r.shared.owned {
			if slices.Contains(o.replicas, reader) {
				c, err := tensorutil.Clone(r.params[o.i])
				if err != nil {
					return err
				}
				vals = append(vals, c)
			}
		}
		if err := ep.Send(ctx, transport.Message{Kind: transport.Shared, To: transport.Peer(reader), Version: r.version, Values: vals}); err != nil {
			return err
		}
	}
	return nil
}

// readersOfOwned are the stages that replicate a learnable this stage
// owns, ascending.
func (r *Runtime) readersOfOwned() []int {
	var out []int
	for _, o := range r.shared.owned {
		for _, rd := range o.replicas {
			if !slices.Contains(out, rd) {
				out = append(out, rd)
			}
		}
	}
	slices.Sort(out)
	return out
}

// forget drops the versions no microbatch in flight needs any more, once
// m's backward ran.
func (r *Runtime) forget(m int) {
	for j := range r.shared.replicas {
		rp := &r.shared.replicas[j]
		oldest := rp.last
		for mb, v := range rp.readAt {
			if _, inFlight := r.kept[mb]; inFlight {
				oldest = min(oldest, v)
			}
		}
		for v := range rp.versions {
			if v < oldest {
				delete(rp.versions, v)
			}
		}
	}
}
