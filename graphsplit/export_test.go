package graphsplit

// StatelessOnly makes stages compute only BatchNorm and MaxPool with stage
// ops — plain, the BatchNorm without its scale, bias and Rectify — and
// re-apply every other op of the user's: the user's ops wherever keeping
// activations allows them, for tests that compare keeping runs with them.
func StatelessOnly() Option { return func(c *config) { c.statelessOnly = true } }
