package asyncvm

// withInject makes fail(stage, action) run before every action; a non-nil
// error (or a panic) fails that action. Tests only.
func withInject(fail func(stage int, a Action) error) Option {
	return func(c *config) { c.inject = fail }
}
