package train

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/zoo"
)

// TestResolvedIdentity: peers compare resolved settings. A spec that gives
// the recipe's own values (rate, seed, method, N, the method's T1 and
// momentum, the exact kernels, the balanced placement) has the identity of one that leaves them alone; one that
// gives another value is refused naming the setting and both resolved
// values; another run length is refused naming the length, not the T1 and
// warm-up that follow from it.
func TestResolvedIdentity(t *testing.T) {
	r, err := zoo.RecipeFor("mlp")
	require.NoError(t, err)
	identity := func(s runspec.Spec) transport.Identity {
		c, err := ConfigFor(s, r, 8000)
		require.NoError(t, err)
		return Resolved(r, c).Identity("fp")
	}
	alone := runspec.Spec{Model: "mlp", Data: "embedded"}
	steps := 8000 / (r.Run.Microbatch * r.Run.Microbatches)
	lr, seed, t1, beta := r.Run.LR, r.Run.Seed, r.Run.Epochs*steps-r.Warmup*steps, 0.9 // T1: every step after the one-epoch warm-up
	same := runspec.Spec{Model: "mlp", Data: "/elsewhere", Method: r.Method, LR: lr, Seed: &seed, Microbatches: r.Run.Microbatches, T1: &t1, Momentum: &beta, Epochs: r.Run.Epochs, Placement: "balanced", Kernels: "exact"}
	require.NoError(t, identity(alone).Check(identity(same), "stage 1"))

	for _, c := range []struct {
		edit         func(*runspec.Spec)
		setting      string
		mine, theirs string
	}{
		{func(s *runspec.Spec) { s.LR = 0.1 }, "lr", "0.03", "0.1"},
		{func(s *runspec.Spec) { s.Placement = "v" }, "placement", "balanced", "v"},
		{func(s *runspec.Spec) { s.Placement = "contiguous" }, "placement", "balanced", "contiguous"},
		{func(s *runspec.Spec) { seed := int64(9); s.Seed = &seed }, "seed", "1", "9"},
		{func(s *runspec.Spec) { s.Method = "naive" }, "method", "pipemare", "naive"},
		{func(s *runspec.Spec) { s.Epochs = 3 }, "epochs", "4", "3"},
		{func(s *runspec.Spec) { s.Limit = 4000 }, "limit", "", "4000"},
		{func(s *runspec.Spec) { w := 2; s.Warmup = &w }, "warmup", "125", "2"},
		{func(s *runspec.Spec) { s.Kernels = "fast" }, "kernels", "exact", "fast"},
	} {
		other := alone
		c.edit(&other)
		err := identity(alone).Check(identity(other), "stage 1")
		var me *transport.MismatchError
		require.ErrorAs(t, err, &me, c.setting)
		require.Equal(t, c.setting, me.Setting)
		if c.mine != "" {
			require.Equal(t, [2]string{c.mine, c.theirs}, [2]string{me.Mine, me.Theirs}, c.setting)
		}
	}
}
