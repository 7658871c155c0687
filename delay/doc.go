// Package delay describes the weight delays of delay-injection training:
// how many updates old the weights are that each stage's forward of each
// microbatch reads. A Source is fixed per stage (Fixed, and PipeMare, the
// delays of a PipeMare pipeline), random (Exponential, the truncated
// exponential of the PipeMare paper's Hogwild-style experiment) or recorded
// from a real run (Recorded). asyncvm.NewInjected trains with one.
package delay
