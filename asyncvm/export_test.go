package asyncvm

import "github.com/pipemare/pipemare/schedule"

// withInject makes fail(stage, action) run before every action; a non-nil
// error (or a panic) fails that action. Tests only.
func withInject(fail func(stage int, a schedule.Action) error) Option {
	return func(c *config) { c.inject = fail }
}
