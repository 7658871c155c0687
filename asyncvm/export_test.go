package asyncvm

import "github.com/pipemare/pipemare/schedule"

// withInject makes fail(stage, action) run before every action; a non-nil
// error (or a panic) fails that action. Tests only.
func withInject(fail func(stage int, a schedule.Action) error) Option {
	return func(c *config) { c.inject = fail }
}

// WeightPrograms returns, per stage, the W's that computed the weights'
// gradients (stage.Stats.WeightPrograms) so far. Tests only.
func WeightPrograms(vm *VM) []int {
	out := make([]int, len(vm.heard))
	for i, h := range vm.heard {
		out[i] = h.stats.WeightPrograms
	}
	return out
}
